package toolrequest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// spoolDir lays out a spool (requests/ of the consumer, .processing/
// root-only) and returns it.
func spoolDir(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t, "request files are owned by the consumer UID")
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{RequestsDir: 0o700, ProcessingDir: 0o700} {
		if err := os.Mkdir(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(dir, RequestsDir), consumer, consumer); err != nil {
		t.Fatal(err)
	}
	return dir
}

// request writes requests/<id>.json as the consumer would: mode 0600,
// owned by the consumer.
func spoolRequest(t *testing.T, dir, id string, body []byte) string {
	t.Helper()
	p := filepath.Join(dir, RequestsDir, id+".json")
	if err := os.WriteFile(p, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, consumer, consumer); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClaimMovesThenReads: the control case; the request is in
// .processing/, not in requests/, and a second claim is not-pending.
func TestClaimMovesThenReads(t *testing.T) {
	dir := spoolDir(t)
	spoolRequest(t, dir, "r1", []byte(`{}`))
	data, err := claimRequest(dir, "r1", consumer)
	if err != nil || string(data) != `{}` {
		t.Fatalf("claim: %q %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ProcessingDir, "r1.json")); err != nil {
		t.Fatalf("not staged: %v", err)
	}
	if _, err := claimRequest(dir, "r1", consumer); !errors.Is(err, ErrNotPending) {
		t.Fatalf("second claim: %v, want ErrNotPending", err)
	}
	// 16 pending is within the quota (the 17th is refused below).
	for i := range MaxPending {
		spoolRequest(t, dir, string(rune('a'+i)), []byte(`{}`))
	}
	if _, err := claimRequest(dir, "a", consumer); err != nil {
		t.Fatalf("the 16th pending request: %v", err)
	}
}

// TestHostileRequestFiles (Security contract: regular non-symlink request
// files, mode 0600, at most 16 pending, 256 KiB each, 1 MiB total): each
// terminal by its rule, never ErrNotPending.
func TestHostileRequestFiles(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		rule  branchbox.Rule
	}{
		{"symlink", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, RequestsDir, "r.json")); err != nil {
				t.Fatal(err)
			}
		}, branchbox.RuleRequestFile},
		{"mode 0644", func(t *testing.T, dir string) {
			if err := os.Chmod(spoolRequest(t, dir, "r", []byte(`{}`)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, branchbox.RuleRequestFile},
		{"hard link", func(t *testing.T, dir string) {
			p := spoolRequest(t, dir, "r", []byte(`{}`))
			if err := os.Link(p, filepath.Join(dir, "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, branchbox.RuleRequestFile},
		{"another owner", func(t *testing.T, dir string) {
			if err := os.Chown(spoolRequest(t, dir, "r", []byte(`{}`)), 0, 0); err != nil {
				t.Fatal(err)
			}
		}, branchbox.RuleRequestFile},
		{"a directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, RequestsDir, "r.json"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, branchbox.RuleRequestFile},
		{"over 256 KiB", func(t *testing.T, dir string) {
			spoolRequest(t, dir, "r", []byte(strings.Repeat("x", 256<<10+1)))
		}, branchbox.RuleRequestQuota},
		{"17th pending", func(t *testing.T, dir string) {
			for i := range MaxPending {
				spoolRequest(t, dir, string(rune('a'+i)), []byte(`{}`))
			}
			spoolRequest(t, dir, "r", []byte(`{}`))
		}, branchbox.RuleRequestQuota},
		{"over 1 MiB in all", func(t *testing.T, dir string) {
			for i := range 5 {
				spoolRequest(t, dir, string(rune('a'+i)), []byte(strings.Repeat("x", 250<<10)))
			}
			spoolRequest(t, dir, "r", []byte(`{}`))
		}, branchbox.RuleRequestQuota},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := spoolDir(t)
			c.setup(t, dir)
			_, err := claimRequest(dir, "r", consumer)
			if branchbox.RuleOf(err) != c.rule || errors.Is(err, ErrNotPending) {
				t.Fatalf("got %v, want rule %s", err, c.rule)
			}
		})
	}
}
