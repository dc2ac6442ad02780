// The cgroup v1 class: a hierarchy mounted and its release_agent written
// (CVE-2022-0492), with a child's notify_on_release set.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

// cgroupV1 mounts a cgroup v1 hierarchy and answers its directory: one
// of the probe's own (a named one, no controller) where the kernel lets
// it make one, else the first existing hierarchy (a controller /proc/cgroups
// lists as mounted) whose root, with its release_agent, it can mount.
func cgroupV1() (string, error) {
	dir, err := os.MkdirTemp("", "probe-cgroup-")
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("none,name=cbprobe%d", os.Getpid())
	err = unix.Mount("cgroup", dir, "cgroup", 0, name)
	if err == nil {
		return dir, nil
	}
	errs := []string{fmt.Sprintf("%s: %v", name, err)}
	data, _ := os.ReadFile("/proc/cgroups")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[0], "#") || f[1] == "0" {
			continue
		}
		if err := unix.Mount("cgroup", dir, "cgroup", 0, f[0]); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", f[0], err))
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "release_agent")); err == nil {
			return dir, nil
		}
		errs = append(errs, f[0]+": mounted below its root (no release_agent)")
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	return "", fmt.Errorf("mount cgroup v1: %s", strings.Join(errs, "; "))
}

// hierarchy names the mount at dir (its options).
func hierarchy(dir string) string {
	for _, m := range mounts() {
		if m.point == dir {
			return m.fstype + " " + m.opts
		}
	}
	return "?"
}

// rewriteAgent writes release_agent's own value back to it: the write is
// where the kernel checks CAP_SYS_ADMIN in the initial user namespace
// (CVE-2022-0492's fix), and the value stays what it was.
func rewriteAgent(dir string) error {
	p := filepath.Join(dir, "release_agent")
	old, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if len(old) == 0 {
		old = []byte("\n")
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(old)
	return err
}

func releaseAgent(c *escape.Config) (bool, string) {
	dir, err := cgroupV1()
	if err != nil {
		return false, err.Error()
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if err := rewriteAgent(dir); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; write release_agent: %v", err)
	}
	return true, fmt.Sprintf("mounted cgroup v1 and wrote its release_agent (its own value back; %s)", hierarchy(dir))
}

func notifyOnRelease(c *escape.Config) (bool, string) {
	dir, err := cgroupV1()
	if err != nil {
		return false, err.Error()
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	child := filepath.Join(dir, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(child, 0o755); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; mkdir a child: %v", err)
	}
	defer os.Remove(child)
	notify := filepath.Join(child, "notify_on_release")
	if err := os.WriteFile(notify, []byte("1\n"), 0); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1; notify_on_release: %v", err)
	}
	// Off again before the child goes: its removal releases nothing.
	defer os.WriteFile(notify, []byte("0\n"), 0)
	if err := rewriteAgent(dir); err != nil {
		return false, fmt.Sprintf("mounted cgroup v1, set notify_on_release, but release_agent: %v", err)
	}
	return true, fmt.Sprintf("mounted cgroup v1, set a child's notify_on_release and wrote release_agent (%s): a release would run the agent on the host", hierarchy(dir))
}
