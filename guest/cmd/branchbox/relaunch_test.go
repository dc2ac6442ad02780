package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
)

// killedLaunch runs `feature launch` of r as a real process that SIGKILLs
// itself at step (feature.Options.Step) and checks that SIGKILL ended it.
func killedLaunch(t *testing.T, r *branchboxtest.Run, step string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	cmd.Env = []string{"BRANCHBOX_TEST_AS_MAIN=1", "BRANCHBOX_TEST_KILL_AT=" + step, "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the launch was not killed at %s: %v: %s", step, err, out)
	}
}

// relaunched launches r in this process and returns its record.
func relaunched(t *testing.T, r *branchboxtest.Run) feature.Record {
	t.Helper()
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	var res struct {
		Status string
		Launch feature.Record
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Status != "launched" {
		t.Fatalf("launch: exit %d (%v): %s%s", code, err, out, errs)
	}
	return res.Launch
}

// engineState is what the engine holds of the run, by name, so that two
// launches compare: each container (of the project or labelled with the
// run) with its state, each network of the project, each volume (labelled
// with the run or of the project) and every entry in it (path, owner,
// mode, and a file's size and SHA-256, a symlink's target).
func engineState(t *testing.T) []string {
	t.Helper()
	project := "label=com.docker.compose.project=" + devcontainer.ProjectName(branchboxtest.RunID)
	run := "label=" + engine.RunLabel + "=" + branchboxtest.RunID
	var out []string
	for _, args := range [][]string{
		{"ps", "-a", "--format", "container {{.Names}} {{.State}}", "--filter", project},
		{"ps", "-a", "--format", "container {{.Names}} {{.State}}", "--filter", run},
		{"network", "ls", "--format", "network {{.Name}}", "--filter", project},
		{"volume", "ls", "--format", "volume {{.Name}}", "--filter", run},
		{"volume", "ls", "--format", "volume {{.Name}}", "--filter", project},
	} {
		o, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatalf("docker %v: %v", args, err)
		}
		out = append(out, strings.Split(strings.TrimSpace(string(o)), "\n")...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	for _, o := range out {
		if name, ok := strings.CutPrefix(o, "volume "); ok {
			out = append(out, volumeTree(t, name)...)
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// volumeTree lists every entry of volume name as the engine holds it.
func volumeTree(t *testing.T, name string) []string {
	t.Helper()
	dir, err := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(dir))
	var out []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, path)
		line := fmt.Sprintf("%s/%s %d:%d %v", name, rel, st.Uid, st.Gid, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(data), sha256.Sum256(data))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRelaunchAfterAKilledLaunch (issue 23 follow-up; Contract: request-
// spool leases, teardown): a launch process SIGKILLed after the facade,
// after the empty volumes, after the workspace copy, and with everything
// up (containers, spools, proxy) but not yet recorded, then the same
// run launched again: the relaunch succeeds, says what it removed first
// (nothing when the killed one had created nothing in the engine), and
// the engine then holds exactly what a clean launch of the run holds:
// the same containers running, networks and volumes, every file in them
// alike (a file put into the killed launch's workspace volume is gone).
// Without the clearing, the relaunch after the workspace volume was
// filled failed once with "copy ...: file exists" (the engine hands an
// existing volume back), and after the spools with the port proxy's name
// taken.
func TestRelaunchAfterAKilledLaunch(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	relaunched(t, r)
	clean := engineState(t)
	if out, errs, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force"); code != 0 {
		t.Fatalf("teardown: exit %d: %s%s", code, out, errs)
	}
	wsVol := devcontainer.WorkspaceVolume(branchboxtest.RunID)
	for _, step := range []string{"prepared", "volumes", "copied", "started"} {
		t.Run(step, func(t *testing.T) {
			r, _ := launchable(t, composeExtra{}, nil)
			killedLaunch(t, r, step)
			left := runObjects(t)
			if step != "prepared" && len(left) == 0 {
				t.Fatalf("the launch killed at %s left nothing in the engine: the relaunch shows nothing", step)
			}
			if step != "prepared" && step != "volumes" {
				tree := volumeTree(t, wsVol)
				if !slices.ContainsFunc(tree, func(s string) bool { return strings.HasPrefix(s, wsVol+"/README ") }) {
					t.Fatalf("the workspace volume the killed launch left is not filled: %v", tree)
				}
				dir, _ := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", wsVol).Output()
				if err := os.WriteFile(filepath.Join(strings.TrimSpace(string(dir)), "left-by-the-killed-launch"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rec := relaunched(t, r)
			if len(rec.Cleared) != len(left) || (len(left) > 0 && !slices.Contains(rec.Cleared, "volume "+wsVol) && step != "prepared") {
				t.Errorf("the relaunch removed first %v; the killed launch left %v", rec.Cleared, left)
			}
			if got := engineState(t); !slices.Equal(got, clean) {
				t.Fatalf("after the relaunch the engine holds\n%s\nwhere a clean launch holds\n%s", strings.Join(got, "\n"), strings.Join(clean, "\n"))
			}
			if _, err := feature.ReadRecord(r.Root, branchboxtest.RunID); err != nil {
				t.Fatalf("the relaunch left no launch record: %v", err)
			}
		})
	}
}

// TestLaunchRefusesAVolumeItDidNotCreate (Contract: request-spool
// leases): a volume of the run's workspace name that is another run's,
// or nobody's, is refused (rule request-spool) and left as it was, files
// and all: the clearing removes only what is labelled this run's. One of
// this run's that appears after the clearing (a launch uses only volumes
// it created) is refused too, and removed with the failed launch.
func TestLaunchRefusesAVolumeItDidNotCreate(t *testing.T) {
	wsVol := devcontainer.WorkspaceVolume(branchboxtest.RunID)
	for _, c := range []struct{ name, label, at string }{
		{"another run's", engine.RunLabel + "=other-run", ""},
		{"unlabelled", "", ""},
		{"this run's after the clearing", engine.RunLabel + "=" + branchboxtest.RunID, "cleared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := launchable(t, composeExtra{}, nil)
			create := func() {
				args := []string{"volume", "create"}
				if c.label != "" {
					args = append(args, "--label", c.label)
				}
				if out, err := exec.Command("docker", append(args, wsVol)...).CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
				dir, _ := exec.Command("docker", "volume", "inspect", "-f", "{{.Mountpoint}}", wsVol).Output()
				if err := os.WriteFile(filepath.Join(strings.TrimSpace(string(dir)), "theirs"), []byte("keep"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", wsVol).Run() })
			if c.at == "" {
				create()
			} else {
				launchStep = func(step string) {
					if step == c.at {
						create()
					}
				}
				t.Cleanup(func() { launchStep = nil })
			}
			out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
			var rep struct{ Rule, Where string }
			json.Unmarshal([]byte(out), &rep)
			if code != exitInvalid || rep.Rule != "request-spool" || rep.Where != "volume "+wsVol {
				t.Fatalf("exit %d: %s%s; want exit %d, rule request-spool at volume %s", code, out, errs, exitInvalid, wsVol)
			}
			if c.at == "" && !slices.ContainsFunc(volumeTree(t, wsVol), func(s string) bool { return strings.HasPrefix(s, wsVol+"/theirs ") }) {
				t.Fatalf("the launch changed %s, which is not the run's", wsVol)
			}
			if left := runObjects(t); len(left) != 0 {
				t.Fatalf("a refused launch left %v", left)
			}
		})
	}
}
