package nspawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CgroupsOf answers the cgroup directories (absolute paths, one per
// hierarchy systemd tracks processes in, sorted) that host process pid is
// in: for a box's Leader, the box's own init.scope. It fails when pid is
// gone or sits in none of those hierarchies.
func CgroupsOf(pid int) ([]string, error) {
	mounts, _, err := hierarchies()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, fmt.Errorf("the cgroups of process %d: %w", pid, err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !(parts[0] == "0" && parts[1] == "" || parts[1] == "name=systemd") {
			continue
		}
		if mnt, ok := mounts[parts[1]]; ok {
			dirs = append(dirs, filepath.Join(mnt, parts[2]))
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("process %d is in no name=systemd or cgroup2 hierarchy mounted here", pid)
	}
	sort.Strings(dirs)
	return dirs, nil
}

// EnterCommand returns a command (not started, killed when ctx ends) that
// runs name with args in every namespace of the box whose PID 1 is the
// host process leader (nsenter -a) and inside that PID 1's cgroups, with
// environment env (the whole environment nsenter gets; name is looked up
// in the box's PATH as env gives it). A plain nsenter leaves the command in its starter's
// cgroup, outside the box's tree: the box's systemd cannot see it, so
// logind cannot move a login (runuser -l, su -) into a session scope and
// pam_systemd waits out its 120 s timeout before the login goes on
// without a session. It fails as CgroupsOf does; a command that cannot
// join a cgroup exits JoinExit.
func EnterCommand(ctx context.Context, leader int, env []string, name string, args ...string) (*exec.Cmd, error) {
	dirs, err := CgroupsOf(leader)
	if err != nil {
		return nil, err
	}
	return joinCommandContext(ctx, dirs, env, "nsenter", append([]string{"-t", strconv.Itoa(leader), "-a", "--", name}, args...)...), nil
}
