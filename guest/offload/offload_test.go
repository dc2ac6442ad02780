package offload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input: a repo key or name outside its grammar is refused, naming it.
func TestNamesGrammar(t *testing.T) {
	for _, k := range []string{"a", "k1", "repo-key_9", strings.Repeat("a", 64)} {
		if err := CheckRepoKey(k); err != nil {
			t.Errorf("repo key %q refused: %v", k, err)
		}
	}
	for _, k := range []string{"", "-a", "A", "a.b", "a:b", "a/b", "../x", strings.Repeat("a", 65), "a b"} {
		if err := CheckRepoKey(k); err == nil || !strings.Contains(err.Error(), "repo key") {
			t.Errorf("repo key %q passed (%v)", k, err)
		}
	}
	for _, n := range []string{"proj", "My.Project-2", "a_b"} {
		if err := CheckName(n); err != nil {
			t.Errorf("name %q refused: %v", n, err)
		}
	}
	for _, n := range []string{"", ".", "..", ".hidden", "a/b", "a b", strings.Repeat("n", 65)} {
		if err := CheckName(n); err == nil {
			t.Errorf("name %q passed", n)
		}
	}
	if CheckKind("cursor") == nil || CheckKind("claude") != nil || CheckKind("codex") != nil {
		t.Error("kinds: claude and codex only")
	}
}

func handover() string {
	b := "# Hand-over: task\n"
	for _, h := range HandoverHeadings {
		b += h + "\nnone\n"
	}
	return b
}

// Contract: Offload, Hand-over: a hand-over missing a heading, with one
// twice, without its first line or over 256 KiB is refused, naming what.
func TestHandoverCheck(t *testing.T) {
	if err := CheckHandover(handover()); err != nil {
		t.Fatalf("a good hand-over refused: %v", err)
	}
	missing := strings.Replace(handover(), "## Decisions made\n", "", 1)
	missing = strings.Replace(missing, "## Commands\n", "", 1)
	var he *HandoverError
	if err := CheckHandover(missing); !errors.As(err, &he) || len(he.Missing) != 2 ||
		!strings.Contains(err.Error(), "## Decisions made") || !strings.Contains(err.Error(), "## Commands") {
		t.Errorf("missing headings: %v", err)
	}
	if err := CheckHandover(handover() + "## Next steps\n"); !errors.As(err, &he) || he.Repeated[0] != "## Next steps" {
		t.Errorf("a heading twice: %v", err)
	}
	if err := CheckHandover(strings.TrimPrefix(handover(), "# Hand-over: task\n")); err == nil || !strings.Contains(err.Error(), "# Hand-over: ") {
		t.Errorf("no first line: %v", err)
	}
	if err := CheckHandover(handover() + strings.Repeat("x", MaxHandover)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("over 256 KiB: %v", err)
	}
}

// A post retried with the same request id after a lost answer is stored
// once (Contract: Offload, Inbox: nothing accepted is duplicated).
func TestAddEntryOncePerRequestID(t *testing.T) {
	st := Store{Paths: Paths{State: t.TempDir()}}
	if err := st.EnsureRepo("k"); err != nil {
		t.Fatal(err)
	}
	a, err := st.AddEntry("k", Entry{Kind: "progress", Body: "one"}, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := st.AddEntry("k", Entry{Kind: "progress", Body: "one"}, "req-1")
	c, _ := st.AddEntry("k", Entry{Kind: "question", Body: "two"}, "req-2")
	all, _ := st.Entries("k", 0)
	if a.Seq != 1 || b.Seq != 1 || c.Seq != 2 || len(all) != 2 {
		t.Fatalf("seqs %d %d %d, %d entries", a.Seq, b.Seq, c.Seq, len(all))
	}
	if after, _ := st.Entries("k", 1); len(after) != 1 || after[0].Body != "two" {
		t.Fatalf("entries after 1: %v", after)
	}
}

// CreateFile never replaces: two writers of one seq cannot both win.
func TestCreateFileNeverReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0000000001.json")
	if err := CreateFile(p, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(p, []byte("second")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v", err)
	}
	if data, _ := os.ReadFile(p); string(data) != "first" {
		t.Fatalf("content %q", data)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".new-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

// Contract: Offload, Copy states.
func TestCopyStates(t *testing.T) {
	dir := t.TempDir()
	st := Store{Paths: Paths{State: filepath.Join(dir, "state"), Workspace: filepath.Join(dir, "ws")}}
	want := func(s string) {
		t.Helper()
		if got, err := st.CopyState("k"); err != nil || got != s {
			t.Fatalf("copy state %q (%v), want %q", got, err, s)
		}
	}
	want("absent")
	st.EnsureRepo("k")
	st.SaveIndex(Index{V: 1, Repos: map[string]IndexEntry{"k": {Name: "proj"}}})
	want("absent") // no directory yet
	os.MkdirAll(st.Paths.Copy("proj"), 0o755)
	want("mirror")
	st.SaveCopy("k", Copy{OffloadID: "o", Unreturned: true})
	want("unreturned")
	st.SaveSession(&Session{Repo: "k", Status: StatusWorking})
	want("busy")
	st.SaveSession(&Session{Repo: "k", Status: StatusStopped})
	want("unreturned")
}
