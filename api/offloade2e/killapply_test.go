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

	"github.com/cocoonbox/cocoonbox/internal/offloadtest"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// generated is how many files the box adds under gen/: enough that git
// apply writes them for about a second here, so the kill lands while it
// writes (the test checks that it did).
const generated = 2000

// Contract: Offload, "Back, Mac side", the merge rules: the work tree
// changes only under index.lock, and the user's work is never
// overwritten. A `cocoonbox back` killed (its process group, SIGKILL)
// while git apply writes the box's change into the work tree leaves the
// user's staged, unstaged and untracked work byte-identical, the index as
// it was and index.lock held with some of the box's paths written; the
// next back refuses while index.lock is held and says to remove it when no
// git runs, changing nothing; after its removal the back takes the branch
// path (the written paths are now changes of the user's), the branch at
// S′ and the tree untouched.
func TestBackKilledInsideGitApply(t *testing.T) {
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
	first := filepath.Join(top, "gen/f0000.txt")
	wait.Eventually(t, 3*time.Minute, "git apply's first file of the box's", func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("back ended before git apply wrote anything: %s", out.String())
		default:
		}
		_, err := os.Lstat(first)
		return err == nil, fmt.Sprint(err)
	})
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited

	// The kill landed inside git apply: the lock is held, and some of the
	// box's files are written but not all.
	written := count(t, top)
	if _, err := os.Lstat(lock); err != nil || written == 0 || written == generated {
		t.Fatalf("the kill did not land while git apply wrote: index.lock %v, %d of %d files written", err, written, generated)
	}
	t.Logf("killed with %d of the box's %d files written", written, generated)
	if got := work(t, top); got != mine {
		t.Fatalf("the killed back changed the user's work:\n%s\nwas\n%s", got, mine)
	}

	before := offloadtest.State(t, top)
	res, code, _ := cli(t, top, data, "back", "--json")
	if msg, _ := res["error"].(string); code != 3 || res["code"] != "refused" || !strings.Contains(msg, lock+" is held") || !strings.Contains(msg, "remove it when no git runs") {
		t.Fatalf("a back while index.lock is held: exit %d %v, want refused naming the lock and what to do", code, res)
	}
	if got := offloadtest.State(t, top); got != before || work(t, top) != mine {
		t.Fatalf("the refused back changed the repository:\n%s\nwas\n%s", got, before)
	}

	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	before = offloadtest.State(t, top)
	res = mustCLI(t, top, data, "back", "--json")
	m, _ := res["merge"].(map[string]any)
	branch, _ := m["branch"].(string)
	if m["case"] != "branch" || !strings.Contains(fmt.Sprint(m["reason"]), "which you changed since HEAD") {
		t.Fatalf("the back after index.lock's removal: %v, want the branch path", res)
	}
	if got := git(t, top, "rev-parse", branch); got != res["s_prime"] {
		t.Errorf("%s at %s, want S′ %v", branch, got, res["s_prime"])
	}
	if got := offloadtest.State(t, top); got != before || work(t, top) != mine || count(t, top) != written {
		t.Errorf("the branch path changed the tree:\n%s\nwas\n%s", got, before)
	}
	if got := git(t, top, "show", branch+":gen/f1999.txt"); !strings.Contains(got, "of the box file 1999") {
		t.Errorf("the branch lacks the box's last file: %q", got)
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
