// Package nspawn is what both starters of systemd-nspawn boxes on this
// host share: the local supervisor (api/sandbox/local) and the booted-box
// test harness (tests/box). The host has no systemd as PID 1, so nspawn
// runs with --register=no --keep-unit: it takes the cgroup it starts in,
// nothing registers the machine, and its PID 1 is found by walking /proc.
// Each box therefore gets cgroups of its own (MakeCgroups), nspawn joins
// them before it starts (JoinCommand), and commands enter the box through
// the PID 1 Leader finds.
package nspawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Leader returns the host PID of the box's PID 1 once systemd-nspawn
// (host PID nspawn) has started it, and 0 before then or when nspawn is
// gone: the caller polls it. nspawn is a subreaper, so the box's init
// becomes its child in a new PID namespace; until that child has exec'd
// systemd it is still a copy of nspawn, so the namespace alone is not
// enough and its comm must be systemd too.
func Leader(nspawn int) int {
	self, _ := os.Readlink("/proc/self/ns/pid")
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", nspawn, nspawn))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err == nil && ns != self {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				return pid
			}
		}
	}
	return 0
}

// JoinExit is the exit status of a JoinCommand whose shell could not join
// one of the cgroups (a directory removed meanwhile, a full pids limit);
// the command itself never ran.
const JoinExit = 125

// joinScript moves the shell into every directory of $COCOONBOX_CGROUPS,
// then becomes the command. A process started without it stays in its
// starter's cgroup: a box would share one with every other box of the same
// starter, and a command run in a box would neither freeze with it nor be
// reaped by it.
const joinScript = `for d in $COCOONBOX_CGROUPS; do echo $$ >"$d/cgroup.procs" || { echo "cocoonbox: cannot join the box's cgroup $d" >&2; exit 125; }; done; exec "$@"`

// JoinCommand returns a command (not started) that runs name with args
// inside the cgroup directories dirs (absolute paths, one per hierarchy,
// as Cgroups.Dirs or Cgroups.Payloads give them), with environment env
// (the command's whole environment; name is looked up in its PATH). It
// exits JoinExit, with a line on stderr naming the directory, when it
// cannot join one.
func JoinCommand(dirs, env []string, name string, args ...string) *exec.Cmd {
	return joinCommandContext(context.Background(), dirs, env, name, args...)
}

// joinCommandContext is JoinCommand whose command is killed when ctx ends.
func joinCommandContext(ctx context.Context, dirs, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", joinScript, "sh", name}, args...)...)
	cmd.Env = append(append([]string{}, env...), "COCOONBOX_CGROUPS="+strings.Join(dirs, " "))
	return cmd
}

// ConsoleTail returns the last n lines of a box's console log at path
// (what nspawn and the box printed), for the error of a box that did not
// boot; a file that cannot be read gives "".
func ConsoleTail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
