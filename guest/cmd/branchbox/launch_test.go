package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/moby/moby/client"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/facade"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/launch"
)

// devcontainerCLI is the real @devcontainers/cli that make setup caches.
const devcontainerCLI = "/var/cache/cocoonbox/npm/devcontainers-cli-0.89.0/node_modules/.bin/devcontainer"

// The repository a launch test checks out: two services, the usual
// workspace bind (which the facade drops), a value of the
// devcontainers/cli #904 class, the app answering on port 3000.
const (
	launchConfig = `{
  "dockerComposeFile": "compose.yaml",
  "service": "app",
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/app"
}`
	launchCompose = `services:
  app:
    build: .
    command: ["nc", "-ll", "-p", "3000", "-e", "echo", "hello from app"]
    volumes:
      - ..:/workspaces/app
    environment:
      TRICKY: "it's $${x}"
%s  database:
    image: postgres:16
    command: ["sleep", "1000"]
`
)

// launchable lays out a materialized version 3 run of that repository
// (extra: more YAML of the app service) with real local images and a free
// published port; it returns the run and the port.
func launchable(t testing.TB, extra string, edit func(m map[string]any)) (*branchboxtest.Run, int) {
	t.Helper()
	if _, err := os.Stat(devcontainerCLI); err != nil {
		t.Fatalf("the Dev Containers CLI (make setup installs it): %v", err)
	}
	if err := launchLock(); err != nil {
		t.Fatal(err)
	}
	app, db, proxy := enginetest.ShellImage(t), enginetest.ShellImage(t), enginetest.ProxyImage(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	files := map[string]string{".devcontainer/devcontainer.json": launchConfig, ".devcontainer/compose.yaml": fmt.Sprintf(launchCompose, extra)}
	r := branchboxtest.Lay(t, branchboxtest.WithRepoFiles(t, files, func(m map[string]any) {
		m["service_images"] = map[string]any{"app": app, "database": db}
		m["port_proxy_image"] = proxy
		m["published_ports"] = []any{map[string]any{"host": port, "runtime": 3000}}
		if edit != nil {
			edit(m)
		}
	}))
	t.Cleanup(func() {
		runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force")
	})
	if out, errs, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != 0 {
		t.Fatalf("materialize: exit %d: %s%s", code, out, errs)
	}
	return r, port
}

// launchLock takes, once for the whole test binary (the kernel drops it
// when the binary ends), a flock that keeps launches of run-demo by test
// binaries of other worktrees off the engine meanwhile: the Compose
// project and volumes are named from the run.
var launchLock = sync.OnceValue(func() error {
	var err error
	// Kept in a package variable: a collected *os.File closes its
	// descriptor, and the lock with it.
	if launchLockFile, err = os.OpenFile("/tmp/cocoonbox-branchbox-launch.lock", os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return err
	}
	return syscall.Flock(int(launchLockFile.Fd()), syscall.LOCK_EX)
})

var launchLockFile *os.File

// inContainer runs sh -c script in the container as user.
func inContainer(t *testing.T, id, user, script string) (string, error) {
	t.Helper()
	out, err := exec.Command("docker", "exec", "-u", user, id, "sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// runObjects lists what the engine holds of the run (containers of its
// project or labelled with it, its volumes).
func runObjects(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", "label=com.docker.compose.project=" + facade.ProjectName(branchboxtest.RunID)},
		{"ps", "-aq", "--filter", "label=" + engine.RunLabel + "=" + branchboxtest.RunID},
		{"volume", "ls", "-q", "--filter", "label=" + engine.RunLabel + "=" + branchboxtest.RunID},
	} {
		o, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Fields(string(o))...)
	}
	return out
}

// TestManagedLaunch (Must show): a managed launch of a two-service
// repository with preloaded images comes up through the real Dev
// Containers CLI; the final inspection passes; the consumer runs as
// consumer_uid with the workspace copied in, the spool laid out, the lease
// bind read-only and no endpoint socket; the $${x} and ' value reaches the
// container as Compose gives it; the port proxy answers on loopback. The
// README keeps its delegated mode (owner and group only). A
// request written by the consumer inside the container reaches the
// endpoint once and its answer comes back 0400. Teardown leaves nothing of
// the run in the engine.
func TestManagedLaunch(t *testing.T) {
	r, port := launchable(t, "", nil)
	ep := branchboxtest.Serve(t, r.Listener)
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if code != 0 {
		t.Fatalf("launch: exit %d: %s%s", code, out, errs)
	}
	var res struct {
		Status string
		Launch launch.Record
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Status != "launched" || res.Launch.User != "dev" || res.Launch.UID != 1000 {
		t.Fatalf("launch: %v %s", err, out)
	}
	id := res.Launch.Container
	for script, want := range map[string]string{
		"id -u":               "1000",
		`printf %s "$TRICKY"`: "it's ${x}",
		"stat -c '%u %a' /workspaces/app/README && cat /workspaces/app/README":                                               "1000 660\napp",
		"test -e /workspaces/app/.git || echo no git file":                                                                   "no git file",
		"cd /run/branchbox/leases/tool-requests/delivery && stat -c '%n %u %a' .binding.json .capability requests responses": ".binding.json 0 444\n.capability 0 444\nrequests 1000 700\nresponses 0 755",
		"touch /run/branchbox/leases/shared/exchange/x 2>/dev/null || echo read-only":                                        "read-only",
		"test -e /run/branchbox/leases/tool-endpoints/delivery.sock || echo no socket":                                       "no socket",
	} {
		if got, err := inContainer(t, id, "dev", script); err != nil || got != want {
			t.Errorf("%s: got %q (%v), want %q", script, got, err, want)
		}
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		t.Errorf("the port proxy: %v", err)
	} else {
		got, _ := io.ReadAll(c)
		c.Close()
		if strings.TrimSpace(string(got)) != "hello from app" {
			t.Errorf("through the port proxy: %q", got)
		}
	}

	const request = `cd /run/branchbox/leases/tool-requests/delivery && umask 077 &&
printf '{"version":"1","run_id":"run-demo","lease_id":"delivery_requests","consumer":"coding-agent","request_id":"artifact-delivery","capability":"%s","payload":{"artifact":"it'"'"'s $${x}"}}' "$(cat .capability)" >requests/.tmp && mv requests/.tmp requests/artifact-delivery.json`
	if got, err := inContainer(t, id, "dev", request); err != nil {
		t.Fatalf("the consumer's request: %v: %s", err, got)
	}
	out, errs, code = runIn("feature", "dispatch-tool", "coding-demo", "--root", r.Root, "--lease", "delivery_requests", "--request-id", "artifact-delivery", "--wait-seconds", "30", "--json")
	if code != 0 || !strings.Contains(out, `"status": "dispatched"`) {
		t.Fatalf("dispatch-tool: exit %d: %s%s", code, out, errs)
	}
	got, err := inContainer(t, id, "dev", "cd /run/branchbox/leases/tool-requests/delivery/responses && stat -c '%u %a' artifact-delivery.json && cat artifact-delivery.json")
	if err != nil || !strings.HasPrefix(got, "1000 400\n") || !strings.Contains(got, `"request_id":"artifact-delivery"`) || !strings.Contains(got, `"echo":{"artifact":"it's $${x}"}`) {
		t.Fatalf("the consumer's response: %q (%v)", got, err)
	}
	if ep.Count() != 1 {
		t.Fatalf("the endpoint saw %d frames", ep.Count())
	}

	out, errs, code = runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force", "--json")
	if code != 0 || !strings.Contains(out, "docker container ") || !strings.Contains(out, "docker volume branchbox-run-demo-delivery_requests") {
		t.Fatalf("teardown: exit %d: %s%s", code, out, errs)
	}
	if left := runObjects(t); len(left) != 0 {
		t.Fatalf("the engine still holds %v", left)
	}
}

// TestLaunchMissingImageRunsNothing (Must show): a missing image fails the
// assignment before the CLI runs; nothing is created, built or pulled.
func TestLaunchMissingImageRunsNothing(t *testing.T) {
	r, _ := launchable(t, "", func(m map[string]any) {
		m["service_images"].(map[string]any)["database"] = "sha256:" + strings.Repeat("0", 64)
	})
	out, _, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if code != exitInvalid || !strings.Contains(out, `"rule": "local-image-inspect"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	if left := runObjects(t); len(left) != 0 {
		t.Fatalf("a refused launch left %v", left)
	}
}

// TestLaunchFailedInspectionTearsDown (Security contract: "any other
// writable entry under the managed namespace" fails startup): a tmpfs the
// repository puts in the lease namespace reaches the container, the final
// inspection refuses it, and the launch removes everything it started.
func TestLaunchFailedInspectionTearsDown(t *testing.T) {
	r, _ := launchable(t, "    tmpfs: [/run/branchbox/leases/shared/scratch]\n", nil)
	out, _, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if code != exitInvalid || !strings.Contains(out, `"rule": "final-inspection"`) || !strings.Contains(out, "tmpfs") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if left := runObjects(t); len(left) != 0 {
		t.Fatalf("a failed launch left %v", left)
	}
	c, err := engine.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ns, err := c.NetworkList(context.Background(), client.NetworkListOptions{Filters: make(client.Filters).Add("label", "com.docker.compose.project="+facade.ProjectName(branchboxtest.RunID))}); err != nil || len(ns.Items) != 0 {
		t.Fatalf("networks left: %v %v", ns.Items, err)
	}
}

// TestLaunchAndDispatchBadInput: usage errors exit 2; a lease that is not
// a tool-request, a run never launched and a version 2 launch are refused
// with their rule or as no input, nothing started.
func TestLaunchAndDispatchBadInput(t *testing.T) {
	r := branchboxtest.Lay(t, branchboxtest.WithRepo(t, func(m map[string]any) { m["version"] = "2" }))
	if out, errs, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != 0 {
		t.Fatalf("materialize: exit %d: %s%s", code, out, errs)
	}
	base := []string{"feature", "dispatch-tool", "coding-demo", "--root", r.Root}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{append(base, "--request-id", "r"), exitUsage, "--lease and --request-id are required"},
		{append(base, "--lease", "delivery_requests", "--request-id", "r", "--wait-seconds", "-1"), exitUsage, "a wait is 0 to 3600 seconds"},
		{append(base, "--lease", "lease_model", "--request-id", "r", "--json"), exitInvalid, `"rule": "tool-request-link"`},
		{append(base, "--lease", "delivery_requests", "--request-id", "r", "--json"), exitNoInput, "is not launched"},
		{[]string{"feature", "launch", "coding-demo", "--root", r.Root, "--json"}, exitInvalid, `"rule": "managed-launch-version-3"`},
		{[]string{"feature", "launch", "other-feature", "--root", r.Root}, exitNoInput, "has no materialized run"},
	} {
		out, errs, code := runIn(c.args...)
		if code != c.code || !strings.Contains(out+errs, c.says) {
			t.Errorf("%v: exit %d, want %d saying %q: %s%s", c.args[1:], code, c.code, c.says, out, errs)
		}
	}
	if _, err := launch.ReadRecord(r.Root, branchboxtest.RunID); err == nil {
		t.Fatal("a refused launch left a launch record")
	}
}

// TestTeardownOfALaunchWithoutTheEngineIsResidue: a launched run whose
// engine cannot be reached is not torn down residue-free (its containers
// and volumes may still be there); a run never launched needs no engine.
func TestTeardownOfALaunchWithoutTheEngineIsResidue(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, launched := range []bool{false, true} {
		r := materialized(t)
		if launched {
			if err := launch.WriteRecord(r.Root, branchboxtest.RunID, &launch.Record{Service: "app"}); err != nil {
				t.Fatal(err)
			}
		}
		out, errs, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force", "--json")
		rc := receipt(t, out)
		if launched && (code != exitFailed || rc.ResidueFree || !strings.Contains(out, "docker run run-demo")) {
			t.Fatalf("launched: exit %d: %s%s", code, out, errs)
		}
		if !launched && (code != 0 || !rc.ResidueFree) {
			t.Fatalf("never launched: exit %d: %s%s", code, out, errs)
		}
	}
}
