//go:build booted

package offload

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

// generated is how many files the box adds under gen/, and gated the
// one whose write aside the test holds (gate): back has written the files
// before it and none after when the kill lands.
const (
	generated = 200
	gated     = generated / 2
)

// gate holds back at the write aside of gen/f<gated>.txt, through the
// repository's own smudge filter (back writes the box's files aside with
// git checkout-index, so the user's filters apply, as a git-lfs smudge
// that downloads would): the filter touches reached, then blocks reading
// the FIFO release, which the test never opens, until the kill. The work
// is held where the test wants it, never guessed from how long 2,000
// files take (that kill once came after back had finished). ungate takes
// the filter away.
func gate(t testing.TB, top string) (reached string, ungate func()) {
	t.Helper()
	dir := t.TempDir()
	reached, release := filepath.Join(dir, "reached"), filepath.Join(dir, "release")
	if err := syscall.Mkfifo(release, 0o600); err != nil {
		t.Fatal(err)
	}
	git(t, top, "config", "filter.cbgate.smudge", fmt.Sprintf("touch '%s' && cat '%s' >/dev/null && cat", reached, release))
	attrs := filepath.Join(top, ".git/info/attributes")
	write(t, filepath.Dir(attrs), filepath.Base(attrs), fmt.Sprintf("/gen/f%04d.txt filter=cbgate\n", gated))
	return reached, func() {
		t.Helper()
		git(t, top, "config", "--remove-section", "filter.cbgate")
		if err := os.Remove(attrs); err != nil {
			t.Fatal(err)
		}
	}
}

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

	reached, ungate := gate(t, top)

	cmd := command(top, data, "back", "--json")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	kill := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	defer kill() // a failure before the kill leaves no back held at the gate
	wait.Eventually(t, 3*time.Minute, fmt.Sprintf("back held at the gate, writing gen/f%04d.txt aside", gated), func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("back ended before it reached the gate: %s", out.String())
		default:
		}
		_, err := os.Stat(reached)
		return err == nil, fmt.Sprint(err)
	})
	kill()

	// It was killed while it wrote the box's files aside: those before
	// the gated one are in its stage, none after.
	stage, _ := filepath.Glob(filepath.Join(top, ".git/cocoonbox-back/*/new/gen"))
	if len(stage) != 1 {
		t.Fatalf("the killed back's stage: %v, want one new/gen", stage)
	}
	es, err := os.ReadDir(stage[0])
	if err != nil || len(es) != gated {
		t.Fatalf("the killed back had written %d of the box's files aside (%v), want the %d before the gate", len(es), err, gated)
	}
	ungate()

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
	if got, last := read(t, top, fmt.Sprintf("gen/f%04d.txt", generated-1)), fmt.Sprint("of the box file ", generated-1); !strings.Contains(got, last) {
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
