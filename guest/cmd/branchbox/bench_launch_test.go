package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
)

// BenchmarkLaunchOverhead (issue 15: the launch overhead of BranchBox's
// checks on top of a plain devcontainer up of the same repository): per
// op, `branchbox feature launch` of a materialized run (the repository's
// files read and checked, the facade, the local image inspection, the
// volumes and the workspace copy, the CLI's up, the final inspection, id -u,
// the spools, the port proxy) against the same CLI's up of that repository
// with the same images written into its Compose file (what an unmanaged
// user would run), and their ratio (issue 38). Teardown is outside the
// timings.
func BenchmarkLaunchOverhead(b *testing.B) {
	var managed, plain time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		r, _ := launchable(b, composeExtra{}, nil)
		b.StartTimer()
		start := time.Now()
		if out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI); code != 0 {
			b.Fatalf("launch: exit %d: %s%s", code, out, errs)
		}
		managed += time.Since(start)
		b.StopTimer()
		runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force")
		images := r.Assignment["service_images"].(map[string]any)
		dir := plainRepository(b, images["app"].(string), images["database"].(string))
		b.StartTimer()
		start = time.Now()
		if out, err := exec.Command(devcontainerCLI, "up", "--workspace-folder", dir).CombinedOutput(); err != nil {
			b.Fatalf("plain devcontainer up: %v: %s", err, out)
		}
		plain += time.Since(start)
		b.StopTimer()
		if out, err := exec.Command("docker", "compose", "-p", "plain-bench", "down", "-v").CombinedOutput(); err != nil {
			b.Fatalf("compose down: %v: %s", err, out)
		}
		b.StartTimer()
		n++
	}
	b.ReportMetric(float64(managed.Milliseconds())/float64(n), "launch-ms")
	b.ReportMetric(float64(plain.Milliseconds())/float64(n), "plain-up-ms")
	b.ReportMetric(float64((managed-plain).Milliseconds())/float64(n), "overhead-ms")
	// Issue 38: the launch against the plain up of the same
	// configuration in the same run, as a ratio.
	b.ReportMetric(float64(managed)/float64(plain), "launch/plain")
}

// plainRepository is launchCompose as its owner would run it without
// BranchBox: the images in place of the build, never pulled, the
// workspace bound.
func plainRepository(b *testing.B, app, db string) string {
	dir := filepath.Join(b.TempDir(), "app")
	compose := strings.NewReplacer("build: .", "image: "+app+"\n    pull_policy: never", "image: postgres:16", "image: "+db+"\n    pull_policy: never").
		Replace("name: plain-bench\n" + strings.ReplaceAll(launchCompose, "%s", ""))
	config := strings.Replace(launchConfig, `"remoteUser"`, `"updateRemoteUserUID": false, "remoteUser"`, 1)
	for name, body := range map[string]string{".devcontainer/devcontainer.json": config, ".devcontainer/compose.yaml": compose, "README": "app\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}
