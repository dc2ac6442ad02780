package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

// devcontainerCLI is the real @devcontainers/cli that make setup caches.
const devcontainerCLI = "/var/cache/cocoonbox/npm/devcontainers-cli-0.89.0/node_modules/.bin/devcontainer"

// TestTheCLIsErrorKeepsComposesMessage (issue 38, Deliver 4): when
// `docker compose up` fails inside the real Dev Containers CLI, the error
// launch returns holds Compose's own message: the CLI does not print
// it (its log at every level ends with "Command failed: docker compose
// ... up -d" and a Node stack trace, which the last 2000 bytes kept), so
// the engine's start error of the project's container is added, and the
// stack trace is dropped. Compose fails here on a loopback port this test
// holds.
func TestTheCLIsErrorKeepsComposesMessage(t *testing.T) {
	if _, err := os.Stat(devcontainerCLI); err != nil {
		t.Fatalf("the Dev Containers CLI (make setup installs it): %v", err)
	}
	image := enginetest.ShellImage(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	project := fmt.Sprintf("bb38-cli-error-%d", os.Getpid())
	t.Cleanup(func() {
		ids, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project).Output()
		for _, id := range strings.Fields(string(ids)) {
			exec.Command("docker", "rm", "-fv", id).Run()
		}
		exec.Command("docker", "network", "rm", project+"_default").Run()
	})
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	compose := fmt.Sprintf("name: %s\nservices:\n  app:\n    image: %s\n    pull_policy: never\n    command: [sleep, \"1000\"]\n    ports: [\"127.0.0.1:%d:3000\"]\n",
		project, image, l.Addr().(*net.TCPAddr).Port)
	config := `{"dockerComposeFile": ["` + dir + `/compose.yaml"], "service": "app", "workspaceFolder": "/w", "updateRemoteUserUID": false}`
	for name, body := range map[string]string{"compose.yaml": compose, "devcontainer.json": config, "ws/README": "x"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := engine.Connect()
	if err != nil {
		t.Fatal(err)
	}
	_, err = devcontainerUp(context.Background(), devcontainerCLI, ws, filepath.Join(dir, "devcontainer.json"))
	err = withStartErrors(context.Background(), c, project, err)
	if err == nil || !strings.Contains(err.Error(), "address already in use") && !strings.Contains(err.Error(), "port is already allocated") {
		t.Fatalf("the CLI's error does not say what Compose said:\n%v", err)
	}
	if strings.Contains(err.Error(), "    at ") {
		t.Errorf("the error keeps the CLI's Node stack trace:\n%v", err)
	}
	t.Logf("%v", err)
}

// TestTheCLIsLogKeepsItsHead (issue 38, Deliver 4): a long CLI log keeps
// its head (a Compose configuration error is printed early), its tail
// (the step that failed) and says what it cut; the Node stack trace is
// dropped. The last 2000 bytes alone lost the head.
func TestTheCLIsLogKeepsItsHead(t *testing.T) {
	log := "[t] Start: Run: docker compose config\n[t] validating compose.yaml: services.app.image must be a string\n" +
		strings.Repeat("[t] a line of the CLI's own log\n", 400) + "[t] Exit code 1\nError: Command failed: docker compose up\n    at Qg (/x/devContainersSpecCLI.js:467:889)\n    at async AW (/x.js:1:1)\n"
	got := cliLog([]byte(log))
	for _, want := range []string{"services.app.image must be a string", "Error: Command failed: docker compose up", "bytes of the CLI's log ...]"} {
		if !strings.Contains(got, want) {
			t.Errorf("the kept log lacks %q", want)
		}
	}
	if strings.Contains(got, "    at ") || len(got) > logHead+logTail+100 {
		t.Errorf("kept %d bytes, with the stack trace: %v", len(got), strings.Contains(got, "    at "))
	}
}
