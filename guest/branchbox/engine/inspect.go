package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
)

// Bind is a signed read-only bind: a lease's source on the host at its
// target in the container. Dev and Ino, when Ino is not 0, are the
// source's identity as BranchBox opened and recorded it: what the
// container sees at Target must be that inode (a source swapped for a
// symlink between the check and the engine's mount is another one).
type Bind struct {
	Source, Target string
	Dev, Ino       uint64
}

// Volume is a signed writable named volume (a tool-request spool, or the
// run's workspace) at its target.
type Volume struct{ Name, Target string }

// Mounts is everything a container may show. For the primary, each
// bind and volume exactly once and nothing else; for another service's
// container, what the facade wrote for that service: named volumes (a
// Volume with Name "" is an anonymous one at Target) and Tmpfs targets.
type Mounts struct {
	Binds   []Bind
	Volumes []Volume
	Tmpfs   []string
}

// CheckContainer is the final inspection of the primary container id
// (Contract: Security contract: "Final Docker inspection must show each
// bind-capable lease exactly once as a read-only bind on the primary
// container; a missing, writable, mistargeted, duplicate, or unsigned
// managed mount fails startup", "one exact writable named volume per
// signed tool-request lease ... Docker's Mounts[].Name is the signed volume
// identity", "final inspection rejects a missing or unconfined [seccomp]
// profile"), through the Engine API: every mount of want exactly once (a
// bind found by its source, read-only; a volume by its name, writable), no
// other mount of any type (a HostConfig.Tmpfs entry too), not privileged, no seccomp option in
// HostConfig.SecurityOpt (unconfined or a custom profile), and the
// container's process in seccomp filter mode (/proc/<pid>/status
// "Seccomp: 2", Docker's default profile in force). It returns the
// inspected container. Refusals are *branchbox.RuleError (rule
// final-inspection), engine failures wrap the client's error.
func CheckContainer(ctx context.Context, c *client.Client, id string, want Mounts) (*container.InspectResponse, error) {
	res, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	ct := res.Container
	where := "container " + strings.TrimPrefix(ct.Name, "/")
	refuse := func(detail string, args ...any) error {
		return branchbox.Refuse(branchbox.RuleFinalInspection, where, detail, args...)
	}
	if err := checkMounts(ct.Mounts, want, refuse); err != nil {
		return nil, err
	}
	if ct.HostConfig == nil || ct.State == nil || !ct.State.Running {
		return nil, refuse("is not running")
	}
	// Compose's tmpfs attribute is HostConfig.Tmpfs, not in Mounts.
	for dst := range ct.HostConfig.Tmpfs {
		return nil, refuse("has a tmpfs at %s, which no lease signs", dst)
	}
	if ct.HostConfig.Privileged {
		return nil, refuse("is privileged; the primary container runs under Docker's default seccomp profile")
	}
	for _, o := range ct.HostConfig.SecurityOpt {
		if strings.HasPrefix(o, "seccomp") {
			return nil, refuse("has security option %q; only Docker's built-in seccomp profile is accepted", o)
		}
	}
	if err := checkBindInodes(ct.State.Pid, want.Binds, refuse); err != nil {
		return nil, err
	}
	mode, err := seccompMode(ct.State.Pid)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if mode != "2" {
		return nil, refuse("runs with seccomp mode %s, not 2 (filter): the default profile is missing", mode)
	}
	return &ct, nil
}

// checkMounts holds the container's mounts to want, each exactly once.
func checkMounts(got []container.MountPoint, want Mounts, refuse func(string, ...any) error) error {
	binds := map[string]string{}
	for _, b := range want.Binds {
		binds[b.Source] = b.Target
	}
	volumes := map[string]string{}
	for _, v := range want.Volumes {
		volumes[v.Name] = v.Target
	}
	// A duplicate is named as such whatever order the engine lists the
	// mounts in (else its first copy at another target reads as
	// mistargeted).
	count := map[string]int{}
	for _, m := range got {
		count[string(m.Type)+" "+m.Source+m.Name]++
	}
	for _, m := range got {
		if count[string(m.Type)+" "+m.Source+m.Name] > 1 {
			return refuse("mounts %s %s twice", m.Type, m.Source+m.Name)
		}
	}
	seen := map[string]bool{}
	for _, m := range got {
		var key, target string
		var ok bool
		switch m.Type {
		case mount.TypeBind:
			key = "bind " + m.Source
			if target, ok = binds[m.Source]; !ok {
				return refuse("mounts %s from %s, which no lease signs", m.Destination, m.Source)
			}
			if m.RW {
				return refuse("mounts %s writable; a lease bind is read-only and no writable bind is allowed", m.Destination)
			}
			// The engine's default, which the facade leaves: no mount
			// made later on either side crosses to the other.
			if m.Propagation != mount.PropagationRPrivate {
				return refuse("mounts %s with propagation %q, not rprivate", m.Destination, m.Propagation)
			}
		case mount.TypeVolume:
			key = "volume " + m.Name
			if target, ok = volumes[m.Name]; !ok {
				return refuse("mounts the volume %q at %s, which is not a signed volume name", m.Name, m.Destination)
			}
			if !m.RW {
				return refuse("mounts the volume %q read-only; a request volume is writable", m.Name)
			}
		default:
			return refuse("has a %s mount at %s, which no lease signs", m.Type, m.Destination)
		}
		seen[key] = true
		if m.Destination != target {
			return refuse("mounts %s at %s, not at its signed target %s", key, m.Destination, target)
		}
	}
	for _, b := range want.Binds {
		if !seen["bind "+b.Source] {
			return refuse("does not mount the lease source %s at %s", b.Source, b.Target)
		}
	}
	for _, v := range want.Volumes {
		if !seen["volume "+v.Name] {
			return refuse("does not mount the volume %q at %s", v.Name, v.Target)
		}
	}
	return nil
}

// seccompMode reads the Seccomp field of /proc/<pid>/status (0 off, 1
// strict, 2 filter).
func seccompMode(pid int) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Seccomp:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("/proc/%d/status has no Seccomp field", pid)
}

// checkBindInodes opens each signed bind's target inside the container's
// root (/proc/<pid>/root, resolved in that root, never following a
// symlink) and compares its device and inode with the recorded source's:
// the engine mounts by name, so this is where a source swapped after
// BranchBox's last check shows (a symlink to /etc mounts /etc).
func checkBindInodes(pid int, binds []Bind, refuse func(string, ...any) error) error {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the container's root (pid %d): %w", pid, err)
	}
	defer unix.Close(root)
	for _, b := range binds {
		if b.Ino == 0 {
			continue
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(root, b.Target, &how)
		if err != nil {
			return refuse("its bind target %s cannot be opened in the container without symlinks: %v", b.Target, err)
		}
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("fstat %s in the container: %w", b.Target, err)
		}
		if st.Dev != b.Dev || st.Ino != b.Ino {
			return refuse("shows at %s device %d inode %d, not the lease source %s checked as device %d inode %d (swapped before the engine mounted it)", b.Target, st.Dev, st.Ino, b.Source, b.Dev, b.Ino)
		}
	}
	return nil
}
