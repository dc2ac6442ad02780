package offloade2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// generated is how many files the box adds under gen/: enough that back
// writes them aside for about a second here, so the kill lands while it
// writes (the test checks that it did).
const generated = 2000

// Contract: Offload, "Back, Mac side", the merge rules, and issue 22's
// Deliver 3 (back is all or nothing): a `cocoonbox back` killed (its
// process group, SIGKILL) while it writes the box's change aside leaves
// the user's staged, unstaged and untracked work byte-identical and none
// of the box's files in the work tree; the next back undoes what the
// killed one left (its index.lock, its stage) and merges: every one of
// the box's files comes in, the branch moves to the box's commit, the
// user's work byte-identical.
func TestBackKilledWhileItWritesTheBoxsFiles(t *testing.T) {
	data := t.TempDir()
	top := newRepo(t, "applykill", [2]string{"a.txt", "a.txt one\n"}, [2]string{"b.txt", "b.txt one\n"}, [2]string{"c.txt", "c.txt one\n"})
	write(t, top, "a.txt", "a.txt uncommitted before the offload\n")
	handOver(t, top, data, "a large change", "standin: commit")
	mustCLI(t, top, data, "offload", "--box", boxName, "--yes", "--json")
	// The box's change: the stand-in's commit and gen/, uncommitted there.
	inBox(t, fmt.Sprintf(`cd /workspace/applykill && runuser -u user -- awk 'BEGIN { system("mkdir -p gen")
  for (i = 0; i < %d; i++) { f = sprintf("gen/f%%04d.txt", i); for (j = 0; j < 16; j++) print "line", j, "of the box file", i > f; close(f) } }'`, generated))

	// The user's work meanwhile: unstaged, staged and untracked.
	write(t, top, "b.txt", "b.txt changed by the user, unstaged\n")
	write(t, top, "c.txt", "c.txt staged by the user\n")
	git(t, top, "add", "c.txt")
	write(t, top, "notes.txt", "the user's untracked notes\n")
	mine := work(t, top)
	lock := filepath.Join(top, ".git/index.lock")

	cmd := command(top, data, "back", "--json")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	wait.Eventually(t, 3*time.Minute, "back's first file of the box's written aside", func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("back ended before it wrote anything: %s", out.String())
		default:
		}
		m, err := filepath.Glob(filepath.Join(top, ".git/cocoonbox-back/*/new/gen/f0000.txt"))
		return len(m) > 0, fmt.Sprint(m, err)
	})
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited

	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("the kill did not land while back held index.lock: %v", err)
	}
	if got := work(t, top); got != mine || count(t, top) != 0 {
		t.Fatalf("the killed back changed the user's work (%d of the box's files in the tree):\n%s\nwas\n%s", count(t, top), got, mine)
	}

	res := mustCLI(t, top, data, "back", "--json")
	m, _ := res["merge"].(map[string]any)
	if m["case"] != "merge" {
		t.Fatalf("the back after the kill: %v, want the clean merge", res)
	}
	// HEAD is still S's parent: the branch moved to the box's commit,
	// the user's staged, unstaged and untracked work as it was.
	_, mineNoHead, _ := strings.Cut(mine, "\n")
	if got := work(t, top); !strings.HasSuffix(got, "\n"+mineNoHead) || count(t, top) != generated {
		t.Errorf("after the back the user's work is\n%s\nwas\n%s\n(%d of the box's %d files)", got, mine, count(t, top), generated)
	}
	if got := git(t, top, "log", "-1", "--format=%s"); got != "standin turn 1" {
		t.Errorf("HEAD is %q, want the box's commit", got)
	}
	if _, err := os.Lstat(lock); err == nil {
		t.Error("index.lock left behind")
	}
	if got := read(t, top, "gen/f1999.txt"); !strings.Contains(got, "of the box file 1999") {
		t.Errorf("the box's last file: %q", got)
	}
}

// work is the user's: HEAD, the staged diff and the bytes of every file
// of theirs.
func work(t testing.TB, top string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(git(t, top, "rev-parse", "HEAD") + "\n" + git(t, top, "diff", "--cached") + "\n")
	for _, f := range []string{"a.txt", "b.txt", "c.txt", "notes.txt"} {
		b.WriteString(f + ": " + read(t, top, f))
	}
	return b.String()
}

// count is how many of the box's gen/ files the work tree has.
func count(t testing.TB, top string) int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(top, "gen"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(es)
}
