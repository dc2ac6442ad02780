// Package branchboxtest lays out real run directories for BranchBox's
// tests: the version 3 example (guest/branchbox/testdata) under a
// temporary root, with its materializations, a shared directory and a
// live Unix socket, owned and moded as the contract says.
package branchboxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RunID is the example's run.
const RunID = "run-demo"

// Run is a laid-out run directory.
type Run struct {
	Root, Dir string
	// Assignment is the decoded example as written (edit and Write again).
	Assignment map[string]any
	Listener   *net.UnixListener
}

func testdata() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Example returns the example assignment as a generic map.
func Example(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata(), "assignment-v3.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Lay lays the example out under a new temporary root. edit, when not nil,
// changes the assignment first (its source paths still say
// /run/branchbox/managed; Lay moves them under the root).
func Lay(t testing.TB, edit func(m map[string]any)) *Run {
	t.Helper()
	// Not t.TempDir(): a socket's path must fit in 108 bytes.
	root, err := os.MkdirTemp("", "bb-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	r := &Run{Root: root, Dir: filepath.Join(root, "managed", RunID), Assignment: Example(t)}
	if edit != nil {
		edit(r.Assignment)
	}
	must(t, os.MkdirAll(filepath.Join(root, "managed"), 0o755))
	for _, d := range []string{"", "materializations", "shared", "tool-endpoints"} {
		must(t, os.Mkdir(filepath.Join(r.Dir, d), 0o700))
		must(t, os.Chmod(filepath.Join(r.Dir, d), 0o700))
	}
	must(t, os.Mkdir(filepath.Join(r.Dir, "shared", "exchange"), 0o755))
	must(t, os.Chmod(filepath.Join(r.Dir, "shared", "exchange"), 0o755))
	for _, name := range []string{"delivery-token", "delivery-capability"} {
		data, err := os.ReadFile(filepath.Join(testdata(), "materializations", name))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(r.Dir, "materializations", name), data, 0o600))
	}
	var l *net.UnixListener
	sock := filepath.Join(r.Dir, "tool-endpoints", "delivery.sock")
	l, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	must(t, err)
	t.Cleanup(func() { l.Close() })
	must(t, os.Chmod(sock, 0o600))
	r.Listener = l
	r.Write(t)
	return r
}

// Write writes the assignment (owner-only) with its source paths moved
// under the root.
func (r *Run) Write(t testing.TB) {
	t.Helper()
	data, err := json.MarshalIndent(r.Assignment, "", "  ")
	must(t, err)
	data = []byte(strings.ReplaceAll(string(data), "/run/branchbox/managed/", r.Root+"/managed/"))
	must(t, os.WriteFile(filepath.Join(r.Dir, "assignment.json"), data, 0o600))
}

// SetValue writes a materialization file and signs its new digest in the
// assignment (a value the orchestrator meant).
func (r *Run) SetValue(t testing.TB, name string, value []byte) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(r.Dir, "materializations", name), value, 0o600))
	sum := sha256.Sum256(value)
	for _, l := range r.Assignment["leases"].([]any) {
		for _, m := range l.(map[string]any)["materializations"].([]any) {
			m := m.(map[string]any)
			if strings.HasSuffix(m["source_path"].(string), "/"+name) {
				m["sha256"] = hex.EncodeToString(sum[:])
			}
		}
	}
	r.Write(t)
}

// Lease returns the example's lease by id.
func (r *Run) Lease(t testing.TB, id string) map[string]any {
	for _, l := range r.Assignment["leases"].([]any) {
		if l := l.(map[string]any); l["lease_id"] == id {
			return l
		}
	}
	t.Fatalf("no lease %s", id)
	return nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
