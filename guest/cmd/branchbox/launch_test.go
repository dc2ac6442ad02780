package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
)

// devcontainerCLI is the real @devcontainers/cli that make setup caches.
const devcontainerCLI = "/var/cache/cocoonbox/npm/devcontainers-cli-0.89.0/node_modules/.bin/devcontainer"

// The repository a launch test checks out: two services, the usual
// workspace bind (which the facade drops), a value of the
// devcontainers/cli #904 class, the app answering on port 3000, a named
// volume of the database's (which teardown must remove too). The three
// %s are more YAML of the app service, of the database service and at
// the top level (composeExtra).
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
    volumes:
      - dbdata:/var/lib/data
%svolumes:
  dbdata: {}
%s`
)

// composeExtra is YAML added to launchCompose: of the app service (the
// primary), of the database service, at the top level; and remoteUser,
// when set, the configuration's instead of dev.
type composeExtra struct{ app, database, top, remoteUser string }

// launchable lays out a materialized version 3 run of that repository
// (with extra) with real local images and a free
// published port; it returns the run and the port.
func launchable(t testing.TB, extra composeExtra, edit func(m map[string]any)) (*branchboxtest.Run, int) {
	t.Helper()
	app, db, proxy := enginetest.ShellImage(t), enginetest.ShellImage(t), enginetest.ProxyImage(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	config := launchConfig
	if extra.remoteUser != "" {
		config = strings.Replace(config, `"remoteUser": "dev"`, `"remoteUser": "`+extra.remoteUser+`"`, 1)
	}
	files := map[string]string{".devcontainer/devcontainer.json": config, ".devcontainer/compose.yaml": fmt.Sprintf(launchCompose, extra.app, extra.database, extra.top)}
	return launchableFiles(t, files, func(m map[string]any) {
		m["service_images"] = map[string]any{"app": app, "database": db}
		m["port_proxy_image"] = proxy
		m["published_ports"] = []any{map[string]any{"host": port, "runtime": 3000}}
		if edit != nil {
			edit(m)
		}
	}), port
}

// launchableFiles lays out a materialized version 3 run of a repository
// of files (its assignment edited by edit), torn down at cleanup.
func launchableFiles(t testing.TB, files map[string]string, edit func(m map[string]any)) *branchboxtest.Run {
	t.Helper()
	if _, err := os.Stat(devcontainerCLI); err != nil {
		t.Fatalf("the Dev Containers CLI (make setup installs it): %v", err)
	}
	if err := launchLock(); err != nil {
		t.Fatal(err)
	}
	r := branchboxtest.Lay(t, branchboxtest.WithRepoFiles(t, files, edit))
	t.Cleanup(func() {
		runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force")
	})
	if out, errs, code := runIn("feature", "materialize", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root); code != 0 {
		t.Fatalf("materialize: exit %d: %s%s", code, out, errs)
	}
	return r
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

// runObjects lists what the engine holds of the run: containers of its
// project or labelled with it, the project's networks, volumes labelled
// with the run or of the project (the repository's named volumes).
func runObjects(t *testing.T) []string {
	t.Helper()
	project := "label=com.docker.compose.project=" + devcontainer.ProjectName(branchboxtest.RunID)
	run := "label=" + engine.RunLabel + "=" + branchboxtest.RunID
	var out []string
	for _, args := range [][]string{
		{"ps", "-aq", "--filter", project}, {"ps", "-aq", "--filter", run},
		{"network", "ls", "-q", "--filter", project},
		{"volume", "ls", "-q", "--filter", run}, {"volume", "ls", "-q", "--filter", project},
	} {
		o, err := exec.Command("docker", args...).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range strings.Fields(string(o)) {
			out = append(out, args[0]+" "+id)
		}
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
	r, port := launchable(t, composeExtra{}, nil)
	ep := branchboxtest.Serve(t, r.Listener)
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if code != 0 {
		t.Fatalf("launch: exit %d: %s%s", code, out, errs)
	}
	var res struct {
		Status string
		Launch feature.Record
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
	r, _ := launchable(t, composeExtra{}, func(m map[string]any) {
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

// TestHostileComposeKeysRefusedBeforeStart (Allow-list Compose): a
// repository's Compose file with a key the allow-list does not pass, on
// the primary service or another one, is refused before anything starts,
// rule compose-key naming the file, the service and the key; nothing is
// created in the engine. These are the keys a real launch once kept (the
// facade hardened by deleting the keys it feared): SYS_ADMIN, the host's
// PID namespace and network, a port on every address, devices,
// privileged (which cannot even start on this host), seccomp off, a
// local volume binding the guest's /, the engine's own socket.
func TestHostileComposeKeysRefusedBeforeStart(t *testing.T) {
	keys := []struct{ yaml, where string }{
		{"cap_add: [SYS_ADMIN, SYS_PTRACE]", "cap_add"},
		{"devices: [\"/dev/null:/dev/bbnull\"]", "devices"},
		{"pid: host", "pid"},
		{"network_mode: host", "network_mode"},
		{"ports: [\"0.0.0.0:3999:3000\"]", "ports"},
		{"privileged: true", "privileged"},
		{"security_opt: [seccomp=unconfined]", "security_opt"},
		{"use_api_socket: true", "use_api_socket"},
		{"ipc: host", "ipc"},
		{"userns_mode: host", "userns_mode"},
		{"volumes_from: [other]", "volumes_from"},
		{"container_name: branchbox-run-demo-port-proxy", "container_name"},
	}
	// One materialized run; each case rewrites its workspace's Compose
	// file (a refused launch leaves no record, so the next may launch).
	r, _ := launchable(t, composeExtra{}, nil)
	for _, service := range []string{"app", "database"} {
		for _, k := range keys {
			t.Run(service+" "+k.where, func(t *testing.T) {
				extra := composeExtra{}
				line := "    " + k.yaml + "\n"
				if service == "app" {
					extra.app = line
				} else {
					extra.database = line
				}
				launchRefused(t, r, extra, "compose-key", ".devcontainer/compose.yaml: services."+service+"."+k.where)
			})
		}
	}
	for name, c := range map[string]struct {
		extra composeExtra
		where string
	}{
		"a volume binding the guest's root":         {composeExtra{top: "  root:\n    driver_opts: {type: none, o: bind, device: /}\n"}, ".devcontainer/compose.yaml: volumes.root.driver_opts"},
		"an external volume (another run's spool)":  {composeExtra{top: "  spool:\n    external: true\n    name: branchbox-other-delivery_requests\n"}, ".devcontainer/compose.yaml: volumes.spool.external"},
		"a tmpfs on the primary":                    {composeExtra{app: "    tmpfs: [/run/branchbox/leases/shared/scratch]\n"}, ".devcontainer/compose.yaml: services.app.tmpfs"},
		"BranchBox's run label":                     {composeExtra{database: "    labels: {io.branchbox.run: other}\n"}, "services.database.labels.io.branchbox.run"},
		"a secret":                                  {composeExtra{top: "secrets:\n  s:\n    external: true\n"}, ".devcontainer/compose.yaml: secrets"},
		"a volume keyed like BranchBox's workspace": {composeExtra{top: "  branchbox-workspace: {}\n"}, ".devcontainer/compose.yaml: volumes.branchbox-workspace"},
	} {
		t.Run(name, func(t *testing.T) { launchRefused(t, r, c.extra, "compose-key", c.where) })
	}
	// The control: the run launches once its Compose file is the plain one.
	launchRefused(t, r, composeExtra{}, "", "")
}

// launchRefused writes launchCompose with extra into run r's workspace
// and launches it, wanting exit 65 by rule, where exactly as said, and
// nothing of the run in the engine (rule "": the launch succeeds).
func launchRefused(t *testing.T, r *branchboxtest.Run, extra composeExtra, rule, where string) {
	t.Helper()
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	if err := os.WriteFile(filepath.Join(ws, ".devcontainer", "compose.yaml"), []byte(fmt.Sprintf(launchCompose, extra.app, extra.database, extra.top)), 0o660); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if rule == "" {
		if code != 0 {
			t.Fatalf("the control launch: exit %d: %s%s", code, out, errs)
		}
		return
	}
	var rep struct{ Rule, Where, Error string }
	json.Unmarshal([]byte(out), &rep)
	if code != exitInvalid || rep.Rule != rule || rep.Where != where {
		t.Fatalf("exit %d, rule %q where %q: %s%s; want exit 65, rule %s where %s", code, rep.Rule, rep.Where, out, errs, rule, where)
	}
	if left := runObjects(t); len(left) != 0 {
		t.Fatalf("a refused launch left %v", left)
	}
}

// injectingCLI is a Dev Containers CLI that adds the Compose file
// override after the facade's before it runs the real one: what an
// image's devcontainer.metadata, the CLI or a writer racing BranchBox
// could add once the facade is written.
func injectingCLI(t *testing.T, override string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/override.yaml", []byte(override), 0o644); err != nil {
		t.Fatal(err)
	}
	// Called as: up --workspace-folder WS --config CONFIG.
	script := `#!/bin/sh
set -e
sed 's#\("/[^"]*/compose.yaml"\)#\1, "` + dir + `/override.yaml"#' "$5" >` + dir + `/devcontainer.json
exec ` + devcontainerCLI + ` "$1" "$2" "$3" "$4" ` + dir + `/devcontainer.json
`
	if err := os.WriteFile(dir+"/devcontainer", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + "/devcontainer"
}

// TestFinalInspectionOfEveryContainer (Allow-list Compose: the final
// inspection reads every container's HostConfig): a setting added after
// the facade (injectingCLI) on the primary or another service reaches the
// engine, the final inspection refuses it naming the container, and the
// launch removes everything it started.
func TestFinalInspectionOfEveryContainer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// Each HostConfig setting is also held on a real container by
	// engine's TestCheckProjectEveryHostConfig; here the whole launch, on
	// either service, through the real CLI.
	for _, c := range []struct{ service, yaml, says string }{
		{"database", "cap_add: [SYS_ADMIN]", "adds capabilities"},
		{"database", "network_mode: host", "network mode"},
		{"database", fmt.Sprintf("ports: [\"0.0.0.0:%d:3000\"]", port), "publishes"},
		{"database", "volumes: [\"root:/host\"]", "which the facade did not write"}, // driver options: engine TestCheckProjectEveryHostConfig
		{"app", "pid: host", "PID mode"},
		{"app", "security_opt: [seccomp=unconfined]", "security option"},
		// Issue 38, Deliver 2: the run's workspace and spool volumes on
		// another service (it could rewrite .binding.json and read
		// .processing/), and a volume the facade did not write for it.
		{"database", `volumes: ["bbws:/ws", "bbspool:/spool"]`, "mounts BranchBox's volume"},
		{"database", `volumes: ["extra:/extra"]`, "which the facade did not write for service database"},
	} {
		t.Run(c.service+" "+c.yaml, func(t *testing.T) {
			r, _ := launchable(t, composeExtra{}, nil)
			override := "services:\n  " + c.service + ":\n    " + c.yaml + "\nvolumes:\n  root:\n    driver_opts: {type: none, o: bind, device: /}\n  extra: {}\n" +
				"  bbws: {external: true, name: " + devcontainer.WorkspaceVolume(branchboxtest.RunID) + "}\n  bbspool: {external: true, name: " + devcontainer.VolumeName(branchboxtest.RunID, "delivery_requests") + "}\n"
			out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", injectingCLI(t, override), "--json")
			var rep struct{ Rule, Where, Error string }
			json.Unmarshal([]byte(out), &rep)
			if code != exitInvalid || rep.Rule != "final-inspection" || !strings.Contains(rep.Error, c.says) || !strings.Contains(rep.Where, "-"+c.service+"-") {
				t.Fatalf("exit %d: %s%s; want rule final-inspection on the %s container saying %q", code, out, errs, c.service, c.says)
			}
			if left := runObjects(t); len(left) != 0 {
				t.Fatalf("a failed launch left %v", left)
			}
		})
	}
}

// TestLaunchProviderUserFromTheKernel (Deliver 5): the provider's UID is
// the kernel's, never a command's in the container. remoteUser root with
// a start command that replaces /bin/id by one printing 1000 is root; a
// run with no tool-request lease whose workspace copy is the workspace
// consumer's (1001) while the provider is dev (1000) is refused (its
// provider could neither read nor write its workspace: the
// vscode-remote-release #2228 class; it launched before). Nothing is left.
func TestLaunchProviderUserFromTheKernel(t *testing.T) {
	fakeID := `    entrypoint: ["sh", "-c", "rm /bin/id && printf '#!/bin/sh\\necho 1000\\n' >/bin/id && chmod 755 /bin/id && exec \"$$@\"", "sh"]` + "\n"
	for name, c := range map[string]struct {
		extra composeExtra
		edit  func(m map[string]any)
		says  string
	}{
		"remoteUser root, a fake id": {composeExtra{app: fakeID, remoteUser: "root"}, nil, `"root" is root`},
		"the workspace's owner is another uid": {composeExtra{}, func(m map[string]any) {
			m["leases"] = m["leases"].([]any)[:4] // no tool-request lease
		}, "UID 1000 (the kernel's), not the signed consumer UID 1001"},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := launchable(t, c.extra, c.edit)
			out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
			var rep struct{ Rule, Error string }
			json.Unmarshal([]byte(out), &rep)
			if code != exitInvalid || rep.Rule != "provider-user" || !strings.Contains(rep.Error, c.says) {
				t.Fatalf("exit %d: %s%s; want rule provider-user saying %q", code, out, errs, c.says)
			}
			if left := runObjects(t); len(left) != 0 {
				t.Fatalf("a refused launch left %v", left)
			}
		})
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
	if _, err := feature.ReadRecord(r.Root, branchboxtest.RunID); err == nil {
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
			if err := feature.WriteRecord(r.Root, branchboxtest.RunID, &feature.Record{Service: "app"}); err != nil {
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

// TestTeardownReportsWhatItCannotRemove (Deliver 6): a named volume of the
// repository's that teardown cannot remove (a container outside the run
// still uses it) is residue in the receipt, by name, and the teardown is
// not residue-free; everything else of the run is gone.
func TestTeardownReportsWhatItCannotRemove(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	if out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json"); code != 0 {
		t.Fatalf("launch: exit %d: %s%s", code, out, errs)
	}
	vol := devcontainer.ProjectName(branchboxtest.RunID) + "_dbdata"
	holder, err := exec.Command("docker", "run", "-d", "-v", vol+":/held", enginetest.ShellImage(t), "sleep", "1000").Output()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(string(holder))
	t.Cleanup(func() {
		exec.Command("docker", "rm", "-f", id).Run()
		exec.Command("docker", "volume", "rm", "-f", vol).Run()
	})
	out, errs, code := runIn("feature", "teardown", "coding-demo", "--run", branchboxtest.RunID, "--root", r.Root, "--force", "--json")
	rc := receipt(t, out)
	var named bool
	for _, res := range rc.Residue {
		named = named || res.Path == "docker volume "+vol
	}
	if code != exitFailed || rc.ResidueFree || !named {
		t.Fatalf("exit %d: %s%s; want the held volume %s as residue", code, out, errs, vol)
	}
	exec.Command("docker", "rm", "-f", id).Run()
	exec.Command("docker", "volume", "rm", "-f", vol).Run()
	if left := runObjects(t); len(left) != 0 {
		t.Fatalf("the engine still holds %v", left)
	}
}
