package sandboxtest

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// record is a valid identity record of box id named name.
func record(t *testing.T, id, name string) []byte {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &identity.Identity{BoxID: id, WakeID: "AAAAAAAAAAAAAAAAAAAAAA", KeyID: identity.KeyID(pub), PublicKey: identity.EncodePublicKey(pub), Name: name}
	if err := rec.Validate(); err != nil {
		t.Fatal(err)
	}
	return rec.Marshal()
}

// exec runs args with stdin in machine id and answers stdout, stderr and
// the exit code.
func exec(t *testing.T, s *Supervisor, id string, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	p, err := s.Exec(context.Background(), id, sandbox.ExecRequest{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.Stdin().Write(stdin); p.Stdin().Close() }()
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(p.Stderr()); errc <- b }()
	out, _ := io.ReadAll(p.Stdout())
	stderr := <-errc
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(stderr), st.Code
}

const (
	writeAndRead = identityWriter + " write || exit\necho written\nIFS= read -r mid </etc/machine-id\necho \"$mid\""
	newID        = "printf '%s\\n' \"$3\" >\"$t\" && mv -f \"$t\" /etc/machine-id\n" + writeAndRead
)

// A machine's life as the api drives it: made, booted with the identity
// writer as its first command (its id the disk's), the writer run again
// on a wake with a new machine id, refused what it cannot run; its disk
// saved at the size of PutFile's bytes, and a rebase keeping /home/user
// only of them.
func TestAMachinesLifeAsTheAPIDrivesIt(t *testing.T) {
	ctx := context.Background()
	s := New("cbdesk:v1-base", "cbdesk:v2-base")
	id := "cb-0123456789abcdef"
	if _, err := s.Create(ctx, sandbox.Spec{ID: id, Tenant: "alice", Image: "cbdesk:v3-base"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("an image it does not have: %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, sandbox.Spec{ID: id, Tenant: "alice", Image: "cbdesk:v1-base"}); err != nil {
		t.Fatal(err)
	}
	rec := record(t, id, "dev")
	if _, err := s.Boot(ctx, id, sandbox.Command{Args: []string{"sh", "-c", identityWriter + " write || exit", "sh", "other", "mark"}, Stdin: rec}); err == nil {
		t.Fatal("a boot whose record names another hostname booted")
	}
	m, err := s.Boot(ctx, id, sandbox.Command{Args: []string{"sh", "-c", identityWriter + " write || exit", "sh", "dev", "mark"}, Stdin: rec})
	if err != nil || m.State != sandbox.Running || !sandbox.MachineIDRule.MatchString(m.MachineID) {
		t.Fatalf("boot: %+v %v", m, err)
	}
	if got := string(s.Identity(id)); got != string(rec) {
		t.Fatalf("the record in the box: %q, want %q", got, rec)
	}
	if out, _, code := exec(t, s, id, rec, "sh", "-c", writeAndRead, "sh", "dev", "mark"); code != 0 || out != "written\n"+m.MachineID+"\n" {
		t.Fatalf("the identity written again: %q exit %d, want the boot's machine id", out, code)
	}
	if _, stderr, code := exec(t, s, id, []byte("{}"), "sh", "-c", writeAndRead, "sh", "dev", "mark"); code != 1 || !strings.Contains(stderr, "identity write") {
		t.Fatalf("a bad record: exit %d %q", code, stderr)
	}
	if _, stderr, code := exec(t, s, id, nil, "uname", "-a"); code != 127 || !strings.Contains(stderr, "only the identity writer") {
		t.Fatalf("another command: exit %d %q", code, stderr)
	}

	if _, err := s.Hibernate(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, id, sandbox.ExecRequest{Args: []string{"true"}}); !errors.Is(err, sandbox.ErrState) {
		t.Fatalf("exec in a hibernated machine: %v, want ErrState", err)
	}
	if _, err := s.Wake(ctx, id); err != nil {
		t.Fatal(err)
	}
	woken := strings.Repeat("ab", 16)
	out, _, code := exec(t, s, id, rec, "sh", "-c", newID, "sh", "dev", "mark", woken)
	if m, _ := s.Get(ctx, id); code != 0 || out != "written\n"+woken+"\n" || m.MachineID != woken {
		t.Fatalf("a wake's new machine id: %q exit %d, the machine's %s", out, code, m.MachineID)
	}

	home := sandbox.File{Path: "/home/user/notes", Data: make([]byte, 4096)}
	etc := sandbox.File{Path: "/etc/motd", Data: []byte("hello")}
	for _, f := range []sandbox.File{home, etc} {
		if err := s.PutFile(ctx, id, f); err != nil {
			t.Fatal(err)
		}
	}
	sv, err := s.Save(ctx, id, "save-0000000000000001")
	if err != nil || sv.Size != 4096+5 || sv.Image != "cbdesk:v1-base" {
		t.Fatalf("save: %+v %v, want 4101 bytes of v1", sv, err)
	}
	if m, err = s.Rebase(ctx, id, "cbdesk:v2-base"); err != nil || m.Image != "cbdesk:v2-base" || m.State != sandbox.Running {
		t.Fatalf("rebase: %+v %v", m, err)
	}
	if sv, err := s.Save(ctx, id, "save-0000000000000001"); err != nil || sv.Size != 4096 {
		t.Fatalf("the save after the rebase: %+v %v, want /home/user's 4096 bytes", sv, err)
	}
	if n := len(s.Saves()); n != 1 {
		t.Fatalf("a save of the same name again: %d saves, want it replaced", n)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	if n := len(s.Saves()); n != 1 {
		t.Fatalf("the delete took the save: %d left", n)
	}
}

// Hold keeps an operation at its start until released: one whose ctx
// ends meanwhile fails and changes nothing; after the release it runs.
// The tenant's cap refuses a machine past it; Watch sees each state.
func TestHoldCapAndWatch(t *testing.T) {
	ctx := context.Background()
	s := New("cbdesk:v1-base")
	events, err := s.Watch(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetTenantCap(ctx, "alice", 1); err != nil {
		t.Fatal(err)
	}
	id := "cb-0000000000000001"
	if _, err := s.Create(ctx, sandbox.Spec{ID: id, Tenant: "alice", Image: "cbdesk:v1-base"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, sandbox.Spec{ID: "cb-0000000000000002", Tenant: "alice", Image: "cbdesk:v1-base"}); !errors.Is(err, sandbox.ErrCapExceeded) {
		t.Fatalf("a second machine past the cap of 1: %v", err)
	}
	release := s.Hold()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Boot(gone, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held boot whose ctx ended: %v", err)
	}
	if m, _ := s.Get(ctx, id); m.State != sandbox.Stopped {
		t.Fatalf("the held boot changed the machine: %s", m.State)
	}
	booted := make(chan error, 1)
	go func() { _, err := s.Boot(ctx, id); booted <- err }()
	release()
	if err := <-booted; err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, want := range []sandbox.State{sandbox.Stopped, sandbox.Running} {
		e := <-events
		seen = append(seen, string(e.State))
		if e.State != want || e.Machine != id {
			t.Fatalf("events %v, want stopped then running of %s", seen, id)
		}
	}
}
