//go:build booted

package offload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/offload/offloadbox"
)

// childEnv names the variables of a child that runs one offload (TestMain
// runs it instead of the tests), so a test can SIGKILL a real packer
// process at a step.
const childEnv = "COCOONBOX_PACKER_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(child(spec))
	}
	os.Exit(m.Run())
}

// child runs the offload or the back of spec
// "offload|back DATA|SCRIPT|BOX|IMAGE|TOP", progress on stderr.
func child(spec string) int {
	f := strings.Split(spec, "|")
	p := newPacker(f[1], offloadbox.TransportAt(f[2]), f[3], f[4], os.Stderr)
	var err error
	if f[0] == "back" {
		_, err = p.Back(context.Background(), f[5], false)
	} else {
		_, err = p.Offload(context.Background(), packer.OffloadOptions{Dir: f[5], Kind: "claude"})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// killAt runs a child packer (mode offload or back) and SIGKILLs it when
// its progress shows a line starting with step.
func killAt(t *testing.T, r *rig, mode, data, top, step string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{mode, data, r.tr.Script(), r.b.Name, r.image, top}, "|"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if strings.HasPrefix(sc.Text(), step) {
			cmd.Process.Kill()
			return
		}
	}
	t.Fatalf("the child %s never reached %q:\n%s", mode, step, strings.Join(seen, "\n"))
}

// Contract: Offload, "Offload, Mac side" (issue 13, must show): a packer
// killed at each step leaves the repository as it was, and a rerun goes
// on to an offload that comes back.
func killedAtEachStep(t *testing.T, r *rig) {
	for _, step := range []string{"cocoonbox: begin:", "cocoonbox: rsync:", "cocoonbox: send:"} {
		t.Run(strings.Trim(strings.Fields(step)[1], ":"), func(t *testing.T) {
			data := t.TempDir()
			p := r.packer(t, data)
			top, _ := repo(t, p, "killed-"+strings.Trim(strings.Fields(step)[1], ":"))
			before := state(t, top)
			killAt(t, r, "offload", data, top, step)
			if after := state(t, top); after != before {
				t.Errorf("killed at %q, the repository changed:\n%s\nwas\n%s", step, after, before)
			}
			// The rerun: the killed offload either never reached the box's
			// inbox (the stale record is cleared) or did (back first).
			res, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
			var ref *packer.Refusal
			if errors.As(err, &ref) && strings.Contains(ref.Msg, "in flight") {
				if _, err := p.Back(context.Background(), top, false); err != nil {
					t.Fatalf("back of the offload the box took before the kill: %v", err)
				}
				res, err = p.Offload(context.Background(), packer.OffloadOptions{Dir: top, Kind: "claude"})
			}
			if err != nil || !res.Accepted {
				t.Fatalf("the rerun after a kill at %q: %v %+v\nprogress:\n%s", step, err, res, r.progress)
			}
			if _, err := p.Back(context.Background(), top, false); err != nil {
				t.Fatalf("back after the rerun: %v", err)
			}
			// Every S left is an offload that came back; a killed one's went.
			for _, ref := range strings.Fields(git(t, top, "for-each-ref", "--format=%(refname)", "refs/cocoonbox/base")) {
				id := strings.TrimPrefix(ref, "refs/cocoonbox/base/")
				if !strings.Contains(git(t, top, "for-each-ref", "refs/cocoonbox/back/"+id), id) {
					t.Errorf("%s of a killed offload is left", ref)
				}
			}
		})
	}
}

// Contract: Offload, "Back, Mac side": a back killed while it waits or
// at the fetch leaves the repository as it was; the next back sees the
// outbox's back (or sends BACK again) and finishes.
func killedBack(t *testing.T, r *rig) {
	for name, step := range map[string]string{"wait": "cocoonbox: back: BACK", "fetch": "cocoonbox: fetch:"} {
		t.Run(name, func(t *testing.T) {
			data := t.TempDir()
			p := r.packer(t, data)
			top, _ := repo(t, p, "killed-back-"+name, "standin: commit")
			offloadRepo(t, p, top)
			before := state(t, top)
			killAt(t, r, "back", data, top, step)
			if after := state(t, top); after != before {
				t.Errorf("back killed at %q changed the repository:\n%s\nwas\n%s", step, after, before)
			}
			back, err := p.Back(context.Background(), top, false)
			if err != nil || back.Merge.Case != packer.CaseFastForward {
				t.Fatalf("the back after a kill at %q: %v %+v", step, err, back)
			}
		})
	}
}
