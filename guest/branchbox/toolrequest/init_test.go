package toolrequest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// asConsumer runs sh -c script as the consumer and reports whether it
// succeeded, with its output.
func asConsumer(t *testing.T, script string) (bool, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: consumer, Gid: consumer, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return err == nil, string(out)
}

// TestInitLaysOutTheContractsSpool (Contract: request-spool leases, the
// volume's paths): each entry with its owner and mode; the consumer can
// finalize a request in requests/ and read the binding and capability, and
// can replace, add or read nothing else.
func TestInitLaysOutTheContractsSpool(t *testing.T) {
	testenv.RequireRoot(t, "the spool's entries are given to the consumer UID")
	dir := filepath.Join(branchboxtest.Dir0755(t), "volume")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := SpoolBinding{EnvelopeVersion: "1", RunID: "run-demo", LeaseID: "delivery_requests", Consumer: "coding-agent", ConsumerUID: consumer,
		Requests: "/run/branchbox/leases/tool-requests/delivery/requests", MaxPending: MaxPending, ReplayPolicy: branchbox.ReplayExactDigest}
	if err := Init(dir, b, []byte("endpoint-only-random-value")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		mode os.FileMode
		uid  uint32
	}{
		"":             {os.ModeDir | 0o755, 0},
		BindingFile:    {0o444, 0},
		CapabilityFile: {0o444, 0},
		RequestsDir:    {os.ModeDir | 0o700, consumer},
		responsesDir:   {os.ModeDir | 0o755, 0},
		ProcessingDir:  {os.ModeDir | 0o700, 0},
	} {
		st, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want.mode || st.Sys().(*syscall.Stat_t).Uid != want.uid {
			t.Errorf("%q: mode %v uid %d, want %v uid %d", name, st.Mode(), st.Sys().(*syscall.Stat_t).Uid, want.mode, want.uid)
		}
	}
	var back SpoolBinding
	data, _ := os.ReadFile(filepath.Join(dir, BindingFile))
	if err := json.Unmarshal(data, &back); err != nil || back != b {
		t.Fatalf("binding %s (%v)", data, err)
	}
	if ok, out := asConsumer(t, "cd "+dir+" && cat .capability .binding.json >/dev/null && umask 077 && echo '{}' >requests/.r.tmp && mv requests/.r.tmp requests/r.json"); !ok {
		t.Fatalf("the consumer cannot finalize a request: %s", out)
	}
	for _, script := range []string{
		"echo x >" + dir + "/.capability", "rm -f " + dir + "/.binding.json", "echo x >" + dir + "/responses/r.json",
		"ls " + dir + "/.processing", "mv " + dir + "/requests " + dir + "/r2", "echo x >" + dir + "/new",
	} {
		if ok, _ := asConsumer(t, script); ok {
			t.Errorf("the consumer could: %s", script)
		}
	}
}

// TestInitRefusesAUsedVolume: a volume already holding anything is not
// this run's fresh one, and is left as it was.
func TestInitRefusesAUsedVolume(t *testing.T) {
	testenv.RequireRoot(t, "the spool's entries are given to the consumer UID")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "requests"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Init(dir, SpoolBinding{ConsumerUID: consumer}, []byte("c"))
	if branchbox.RuleOf(err) != branchbox.RuleRequestSpool {
		t.Fatalf("got %v, want rule %s", err, branchbox.RuleRequestSpool)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the volume was changed: %v", entries)
	}
}
