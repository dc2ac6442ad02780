package packer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/packer"
	"github.com/cocoonbox/cocoonbox/tests/offloadbox"
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

// child runs the offload of spec "DATA|SCRIPT|BOX|IMAGE|TOP", progress on
// stderr.
func child(spec string) int {
	f := strings.Split(spec, "|")
	p := &packer.Packer{Dirs: packer.Dirs{Root: filepath.Join(f[0], "cocoonbox/offload")}, Transport: offloadbox.TransportAt(f[1]),
		Box: packer.BoxInfo{ID: "cb-0000000000000001", Name: f[2], Image: f[3]}, Progress: packer.Progress{W: os.Stderr}, Yes: true}
	if _, err := p.Offload(context.Background(), packer.OffloadOptions{Dir: f[4], Kind: "claude"}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
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
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{data, r.tr.Script(), r.b.Name, r.image, top}, "|"))
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			sc := bufio.NewScanner(stderr)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if strings.HasPrefix(sc.Text(), step) {
					cmd.Process.Kill()
					killed = true
					break
				}
			}
			cmd.Wait()
			if !killed {
				t.Fatalf("the child never reached %q:\n%s", step, strings.Join(seen, "\n"))
			}
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
