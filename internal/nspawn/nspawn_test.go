package nspawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// A command joins each of the box's cgroups before it runs: both starters
// depend on it (a box sharing its starter's cgroup lost unit cgroups to
// another box's systemd).
func TestJoinCommandRunsInTheBoxsCgroups(t *testing.T) {
	testenv.RequireRoot(t, "making cgroups")
	cg, err := MakeCgroups("cocoonbox-nspawn-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cg.Remove)
	out, err := JoinCommand(cg.Dirs, []string{"PATH=/usr/bin:/bin"}, "cat", "/proc/self/cgroup").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if (parts[1] == "" || parts[1] == "name=systemd") && !strings.HasSuffix(parts[2], "/cocoonbox-nspawn-test") {
			t.Errorf("the command ran in %s, not the box's cgroup (%v)", line, cg.Dirs)
		}
	}
	if cg.Unified != "" && !cg.Empty() {
		t.Errorf("%s still populated after its only process exited", cg.Unified)
	}
	cg.Remove()
	for _, d := range cg.Dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after Remove: %v", d, err)
		}
	}
}

// A cgroup the shell cannot join stops the command before it runs, with
// JoinExit and the directory named; the control case is a directory it can
// join (any directory takes a write of cgroup.procs outside cgroupfs).
func TestJoinCommandRefusesAnUnjoinableCgroup(t *testing.T) {
	ok := t.TempDir()
	missing := filepath.Join(ok, "gone")
	for _, c := range []struct {
		dir  string
		exit int
	}{{ok, 0}, {missing, JoinExit}} {
		cmd := JoinCommand([]string{c.dir}, []string{"PATH=/usr/bin:/bin"}, "echo", "ran")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.exit || (c.exit == 0) != strings.Contains(string(out), "ran") {
			t.Errorf("%s: exit %d, want %d; output %q", c.dir, code, c.exit, out)
		}
		if c.exit != 0 && !strings.Contains(string(out), c.dir) {
			t.Errorf("%s: the refusal does not name the directory: %q", c.dir, out)
		}
	}
}

func TestMakeCgroupsRefusesANameThatIsNotOnePathElement(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "../escape"} {
		if cg, err := MakeCgroups(name); err == nil || !strings.Contains(err.Error(), "one path element") {
			cg.Remove()
			t.Errorf("MakeCgroups(%q) = %v, want a refusal naming the rule", name, err)
		}
	}
}

// Leader is 0 for a process that has no box below it (the caller polls
// until it is not), and for one that is gone.
func TestLeaderIsZeroWithoutABox(t *testing.T) {
	if got := Leader(os.Getpid()); got != 0 {
		t.Errorf("Leader(self) = %d, want 0", got)
	}
	if got := Leader(1 << 30); got != 0 {
		t.Errorf("Leader(no such pid) = %d, want 0", got)
	}
}

func TestConsoleTailKeepsTheLastLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(p, []byte("1\n2\n3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ConsoleTail(p, 2); got != "2\n3" {
		t.Errorf("ConsoleTail = %q, want %q", got, "2\n3")
	}
	if got := ConsoleTail(filepath.Join(t.TempDir(), "none"), 2); got != "" {
		t.Errorf("ConsoleTail of a missing file = %q", got)
	}
}

// CgroupsOf finds a process's cgroups as MakeCgroups makes them: a
// process put in a made cgroup is found there, in every hierarchy, and a
// process that is gone is an error naming it.
func TestCgroupsOfFindsTheCgroupsAProcessJoined(t *testing.T) {
	testenv.RequireRoot(t, "making cgroups")
	cg, err := MakeCgroups("cocoonbox-nspawn-cgroupsof")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cg.Remove)
	cmd := JoinCommand(cg.Dirs, []string{"PATH=/usr/bin:/bin"}, "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var got []string
	err = wait.Until(time.Minute, "sleep in its cgroups", func() (bool, string) {
		got, err = CgroupsOf(cmd.Process.Pid)
		return err == nil && slices.Equal(got, cg.Dirs), fmt.Sprintf("%v %v", got, err)
	})
	if err != nil {
		t.Fatalf("CgroupsOf(%d): %v, want %v", cmd.Process.Pid, err, cg.Dirs)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := CgroupsOf(cmd.Process.Pid); err == nil || !strings.Contains(err.Error(), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("CgroupsOf of a process that is gone: %v, want an error naming it", err)
	}
}
