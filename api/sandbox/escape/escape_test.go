//go:build booted

package escape_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/escape"
	"golang.org/x/sys/unix"
)

// principal is who tries an escape in a box: the request that runs
// args there.
type principal struct {
	name string
	req  func(args ...string) sandbox.ExecRequest
}

// principals are the three ways an attacker in a box runs code: as user
// through the door with a login shell (rsh, Session.Exec, the idle
// check), as root through sudo in that door-started tree, and as root in
// a unit the box's own systemd starts.
var principals = []principal{
	{"user", func(args ...string) sandbox.ExecRequest {
		return sandbox.ExecRequest{User: "user", Login: true, Args: args}
	}},
	{"sudo", func(args ...string) sandbox.ExecRequest {
		return sandbox.ExecRequest{User: "user", Login: true, Args: append([]string{"sudo", "-n"}, args...)}
	}},
	{"unit", func(args ...string) sandbox.ExecRequest {
		return sandbox.ExecRequest{User: "user", Login: true, Args: append([]string{"sudo", "-n", "systemd-run", "--wait", "--pipe", "--quiet", "--collect"}, args...)}
	}},
}

// Every case of the probe, run in box A by each principal, reaches
// nothing: no host canary opened, no host-wide file opened for writing,
// no process of the host, of box B or of the supervisor in sight. The
// canaries' contents are in no output and the host's are unchanged.
//
// Issue 37, Deliver 3; contract: a box is a security boundary.
func TestNoEscapeFromABox(t *testing.T) {
	ctx := context.Background()
	if err := writeConfig(ctx, boxA.id, config(t)); err != nil {
		t.Fatal(err)
	}
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, p := range principals {
				t.Run(p.name, func(t *testing.T) {
					out, errOut, _, err := run(ctx, boxA.id, p.req(probePath, name), nil)
					if err != nil {
						t.Fatal(err)
					}
					noCanaryIn(t, out+errOut)
					r := parse(t, name, out, errOut)
					if r.Escaped {
						t.Errorf("ESCAPED: %s", r.Detail)
					} else {
						t.Logf("held: %s", r.Detail)
					}
					hostUnchanged(t)
				})
			}
		})
	}
}

// The control: each case, run on the host as root (outside any box, in a
// mount namespace of its own with one bind mount of the state
// directory), escapes, so a case that reports "held" in a box would have
// seen its escape. The other-box cases run in box B as root, where the
// canary, the process and the socket are its own. A case whose class
// this kernel does not have (no modules, no sysrq-trigger) or that the
// host's root cannot do either (open its own disk's node) has no
// control here, which the subtest logs.
func TestEachCaseEscapesOnTheHost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c := config(t)
	cfgB := c
	cfgB.BoxFiles, cfgB.BoxPath = []string{boxB.canary.path}, boxB.canary.path
	if err := writeConfig(ctx, boxB.id, cfgB); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgFile, mustJSON(t, c), 0o600); err != nil {
		t.Fatal(err)
	}
	bind := filepath.Join(dir, "bind")
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(bind, 0o700)
	os.Mkdir(tmp, 0o700)
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			// Not a skip (make test fails a skip): hostLacks has seen
			// that the host's root cannot do it either, so there is no
			// escape to show here, and the box's case still runs.
			if reason := hostLacks(t, name, c); reason != "" {
				t.Logf("no control on this host: %s", reason)
				return
			}
			var out, errOut string
			if strings.HasPrefix(name, "other-box/") {
				var err error
				out, errOut, _, err = run(ctx, boxB.id, sandbox.ExecRequest{Args: []string{probePath, name}}, nil)
				if err != nil {
					t.Fatal(err)
				}
			} else {
				cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
					`mount --bind "$1" "$2" && TMPDIR="$3" exec "$4" -config "$5" "$6"`, "sh",
					stateDir, bind, tmp, probeBin, cfgFile, name)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				b, _ := cmd.Output()
				out, errOut = string(b), stderr.String()
			}
			noCanaryIn(t, out+errOut)
			r := parse(t, name, out, errOut)
			if !r.Escaped {
				t.Errorf("the case does not see its escape even here: %s", r.Detail)
			} else {
				t.Logf("escaped, as it must here: %s", r.Detail)
			}
			hostUnchanged(t)
		})
	}
}

// hostLacks says why a case cannot escape on this host even as its root,
// or "".
func hostLacks(t testing.TB, name string, c escape.Config) string {
	switch {
	case strings.HasPrefix(name, "kernel-module/"):
		if _, err := os.Stat("/proc/modules"); errors.Is(err, os.ErrNotExist) {
			return "this kernel has no loadable modules (no /proc/modules): init_module and finit_module are ENOSYS for everyone"
		}
	case strings.HasPrefix(name, "sysrq-trigger/"):
		if _, err := os.Stat("/proc/sysrq-trigger"); errors.Is(err, os.ErrNotExist) {
			return "this kernel has no /proc/sysrq-trigger"
		}
	case name == "device/mknod-host-disk":
		maj, min, _ := strings.Cut(c.Disk, ":")
		a, _ := strconv.Atoi(maj)
		b, _ := strconv.Atoi(min)
		node := filepath.Join(t.TempDir(), "disk")
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(uint32(a), uint32(b)))); err != nil {
			return fmt.Sprintf("the host's root cannot make its disk's node: %v", err)
		}
		f, err := os.Open(node)
		if err != nil {
			return fmt.Sprintf("the host's root cannot open its own disk %s either: %v", c.Disk, err)
		}
		f.Close()
	}
	return ""
}

// A process started in a box to outlive it (a double fork into a session
// of its own, which tries to leave the box's cgroup: its namespace's
// root, a new cgroup2 mount's root, the host's root cgroup by a made-up
// handle; as root, a unit of the box's systemd too) is gone when Delete
// returns, whoever started it. The control: before the delete the host
// sees root's.
func TestAProcessDoesNotOutliveItsBox(t *testing.T) {
	ctx := context.Background()
	b, err := bootBox(ctx, "escp", "tenant-a")
	if b != nil {
		defer func() {
			if err := sup.Delete(ctx, b.id); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				t.Error(err)
			}
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := writeConfig(ctx, b.id, config(t)); err != nil {
		t.Fatal(err)
	}
	markers := map[string]string{}
	for _, p := range principals {
		markers[p.name] = fmt.Sprintf("persist%s%s", p.name, random()[:10])
		out, errOut, _, err := run(ctx, b.id, p.req(probePath, "persist/outlive-delete", markers[p.name]), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := parse(t, "persist/outlive-delete", out, errOut)
		if r.Escaped {
			t.Errorf("%s: ESCAPED the box's cgroup: %s", p.name, r.Detail)
		} else {
			t.Logf("%s: %s", p.name, r.Detail)
		}
	}
	// The user's holder ends with its login session (logind's
	// KillUserProcesses=yes); root's holders in units of the box's
	// systemd live until the delete.
	for _, p := range principals {
		pids := hostProcesses(markers[p.name])
		t.Logf("before the delete the host sees %d processes of %s's holders", len(pids), p.name)
		if len(pids) == 0 && p.name != "user" {
			t.Fatalf("the control: the host sees no process of %s's holders (%s) before the delete", p.name, markers[p.name])
		}
	}
	if err := sup.Delete(ctx, b.id); err != nil {
		t.Fatal(err)
	}
	for who, m := range markers {
		if pids := hostProcesses(m); len(pids) > 0 {
			t.Errorf("ESCAPED: %s's holder outlived its box's delete: host PIDs %v", who, pids)
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// hostProcesses are the host's processes whose command line holds
// marker.
func hostProcesses(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}
