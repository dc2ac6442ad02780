package sandbox

import (
	"errors"
	"slices"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/vault/envfile"
)

// Contract: Box API keys: what RenderClaimEnv writes, the guest's parser
// reads back unchanged, and host-only entries are not in it.
func TestRenderClaimEnvRoundTripsThroughTheGuestParser(t *testing.T) {
	entries := []ClaimEntry{
		{Name: "COCOONBOX_VAULT", Value: "A=cbv_1;api.example.com;?key={} B=1;;", Guest: true},
		{Name: "ODD", Value: `quote " dollar $HOME back \ tick ` + "`", Guest: true},
		{Name: "CBV_1", Value: "secret", Hosts: []string{"api.example.com"}, How: "?key={}"},
	}
	if err := CheckClaimEnv(entries); err != nil {
		t.Fatal(err)
	}
	f, err := envfile.Parse(RenderClaimEnv(entries))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries[:2] {
		if v, ok := f.Lookup(e.Name); !ok || v != e.Value {
			t.Errorf("%s read back as %q, %v", e.Name, v, ok)
		}
	}
	if _, ok := f.Lookup("CBV_1"); ok {
		t.Error("a host-only entry is in the guest's file")
	}
}

func TestCheckRefusesBadInputNamingTheRule(t *testing.T) {
	for name, err := range map[string]error{
		"claim name":         CheckClaimEnv([]ClaimEntry{{Name: "1X", Guest: true}}),
		"claim twice":        CheckClaimEnv([]ClaimEntry{{Name: "X", Guest: true}, {Name: "X"}}),
		"vault record":       CheckClaimEnv([]ClaimEntry{{Name: "COCOONBOX_VAULT", Value: "LD_PRELOAD=x;;", Guest: true}}),
		"host entry host":    CheckClaimEnv([]ClaimEntry{{Name: "CBV_1", Value: "s", Hosts: []string{"-bad-"}, How: "?k={}"}}),
		"guest with hosts":   CheckClaimEnv([]ClaimEntry{{Name: "X", Guest: true, Hosts: []string{"a.b"}}}),
		"empty command":      ExecRequest{}.Check(),
		"zero rows":          ExecRequest{Args: []string{"sh"}, TTY: &WindowSize{Cols: 80}}.Check(),
		"login without user": ExecRequest{Args: []string{"sh"}, Login: true}.Check(),
		"relative path":      File{Path: "etc/x"}.Check(),
		"unclean path":       File{Path: "/etc/../x"}.Check(),
		"bad owner":          File{Path: "/x", Owner: "root;rm"}.Check(),
		"bad id":             Spec{ID: "-x", Tenant: "t"}.Check(),
		"bad image":          Spec{ID: "x", Tenant: "t", Image: "cbdesk:1"}.Check(),
		"port":               CheckPort(70000),
		"first too many":     CheckFirst(slices.Repeat([]Command{{Args: []string{"true"}}}, MaxFirstCommands+1)),
		"first empty":        CheckFirst([]Command{{Args: []string{""}}}),
		"first NUL":          CheckFirst([]Command{{Args: []string{"sh", "a\x00b"}}}),
		"first stdin":        CheckFirst([]Command{{Args: []string{"cat"}, Stdin: make([]byte, MaxCommandStdin+1)}}),
	} {
		var inv *InvalidError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &inv) || inv.Rule == "" {
			t.Errorf("%s: %v, want an InvalidError", name, err)
		}
	}
	if err := (Spec{ID: "cb-abc123", Tenant: "user-1", Image: "cbdesk:v12-desk"}).Check(); err != nil {
		t.Errorf("a good spec: %v", err)
	}
	if err := CheckFirst(append(slices.Repeat([]Command{{Args: []string{"true"}}}, MaxFirstCommands-1), Command{Args: []string{"cat"}, Stdin: make([]byte, MaxCommandStdin)})); err != nil {
		t.Errorf("a first command at the limits: %v", err)
	}
}
