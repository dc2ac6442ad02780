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
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/branchboxtest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

// TestARepositoryValueCannotWriteTheCLIsComposeOverride (issue 38,
// Deliver 1): the Dev Containers CLI writes containerEnv as
// `- '<key>=<value>'` with the key unescaped and containerUser as
// `user: <value>` unquoted into its own Compose override. A key or user
// holding a quote and newlines added a bind of the guest's directory to
// the primary container, and the repository's postCreateCommand wrote
// there during up, before the final inspection refused the launch. Each
// is now refused before anything starts (rule devcontainer-config naming
// the field), nothing is written on the guest and nothing is left in the
// engine. The control: the same run launches with a plain key and user.
func TestARepositoryValueCannotWriteTheCLIsComposeOverride(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	guest := t.TempDir()
	if err := os.Chmod(guest, 0o1777); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(guest, "written-by-the-repository")
	bind := "\n    volumes:\n      - " + guest + ":/guesttmp"
	for _, c := range []struct{ name, fields, where string }{
		{"a containerEnv key", `"containerEnv": {` + jsonString("A=1'"+bind+"\n    x-z: 'q") + `: "v"}`, ".devcontainer/devcontainer.json: containerEnv"},
		{"containerUser", `"containerUser": ` + jsonString("dev"+bind), ".devcontainer/devcontainer.json: containerUser"},
		{"a remoteEnv key", `"remoteEnv": {"A\nB": "v"}`, ".devcontainer/devcontainer.json: remoteEnv"},
		{"a containerEnv value with a control character", `"containerEnv": {"A": "1\u001b[2J"}`, ".devcontainer/devcontainer.json: containerEnv.A"},
	} {
		t.Run(c.name, func(t *testing.T) {
			config := `{
  "dockerComposeFile": "compose.yaml",
  "service": "app",
  "remoteUser": "dev",
  "workspaceFolder": "/workspaces/app",
  "postCreateCommand": "touch /guesttmp/written-by-the-repository",
  ` + c.fields + `
}`
			defer func() {
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("the repository's command wrote %s on the guest", marker)
					os.Remove(marker)
				}
			}()
			launchConfigRefused(t, r, config, "devcontainer-config", c.where)
		})
	}
	control := strings.Replace(launchConfig, `"remoteUser": "dev",`, `"remoteUser": "dev", "containerUser": "dev", "containerEnv": {"A_1": "it's $x"},`, 1)
	launchConfigRefused(t, r, control, "", "")
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// launchConfigRefused writes config as run r's devcontainer.json and
// launches r as launchRefused does (with the plain Compose file).
func launchConfigRefused(t *testing.T, r *branchboxtest.Run, config, rule, where string) {
	t.Helper()
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	if err := os.WriteFile(filepath.Join(ws, ".devcontainer", "devcontainer.json"), []byte(config), 0o660); err != nil {
		t.Fatal(err)
	}
	launchRefused(t, r, composeExtra{}, rule, where)
}

// TestAFailedLaunchNamesWhatItCouldNotRemove (issue 38, Deliver 4: what
// a failed up leaves): a launch refused after Compose ran (cap_add added
// to the primary after the facade), one of whose volumes a container
// outside the run took hold of while the CLI ran, fails naming that
// volume as not removed (it would block the run's next launch); before,
// the removal's failures were dropped and the error said nothing of it.
func TestAFailedLaunchNamesWhatItCouldNotRemove(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	vol := devcontainer.ProjectName(branchboxtest.RunID) + "_dbdata"
	holder := "bb38-holder-" + branchboxtest.RunID
	t.Cleanup(func() {
		exec.Command("docker", "rm", "-f", holder).Run()
		exec.Command("docker", "volume", "rm", "-f", vol).Run()
	})
	// The CLI with the cap_add, then a holder of the volume Compose made.
	cli := injectingCLI(t, "services:\n  app:\n    cap_add: [SYS_ADMIN]\n")
	script, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	held := strings.Replace(string(script), "exec "+devcontainerCLI, devcontainerCLI, 1) +
		"docker run -d --name " + holder + " -v " + vol + ":/held " + enginetest.ShellImage(t) + " sleep 1000 >/dev/null\n"
	if err := os.WriteFile(cli, []byte(held), 0o755); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", cli, "--json")
	if code == 0 || !strings.Contains(out, "did not remove: volume "+vol) {
		t.Fatalf("exit %d: %s%s; want the held volume %s named as not removed", code, out, errs, vol)
	}
}

// TestATemplatesWorkspaceFolderLaunches (issue 38, Deliver 3): the
// devcontainers/templates' workspaceFolder,
// /workspaces/${localWorkspaceFolderBasename}, launches through the real
// CLI with the workspace copied there (it was refused as interpolated).
func TestATemplatesWorkspaceFolderLaunches(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	config := strings.Replace(launchConfig, `"/workspaces/app"`, `"/workspaces/${localWorkspaceFolderBasename}"`, 1)
	launchConfigRefused(t, r, config, "", "")
	id, err := exec.Command("docker", "ps", "-q", "--filter", "label=com.docker.compose.project="+devcontainer.ProjectName(branchboxtest.RunID), "--filter", "label=com.docker.compose.service=app").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := inContainer(t, strings.TrimSpace(string(id)), "dev", "cat /workspaces/"+filepath.Base(ws)+"/README"); err != nil || got != "app" {
		t.Fatalf("the workspace at /workspaces/%s: %q (%v)", filepath.Base(ws), got, err)
	}
}

// TestATemplatesNetworkModeLaunches (issue 38, Deliver 3): the
// templates' network_mode: service:db (the primary in the database's
// network namespace, inside the project) launches through the real CLI;
// the final inspection holds the primary to container:<the database
// container's id>, and the port proxy reaches the app at the database's
// name. Before, network_mode was refused by the allow-list.
func TestATemplatesNetworkModeLaunches(t *testing.T) {
	r, port := launchable(t, composeExtra{app: "    network_mode: service:database\n"}, nil)
	out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
	if code != 0 {
		t.Fatalf("launch: exit %d: %s%s", code, out, errs)
	}
	mode, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.NetworkMode}}", devcontainer.ProjectName(branchboxtest.RunID)+"-app-1").Output()
	db, err2 := exec.Command("docker", "inspect", "-f", "{{.Id}}", devcontainer.ProjectName(branchboxtest.RunID)+"-database-1").Output()
	if err != nil || err2 != nil || strings.TrimSpace(string(mode)) != "container:"+strings.TrimSpace(string(db)) {
		t.Fatalf("the app's network mode %q, the database %q (%v %v)", mode, db, err, err2)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("the port proxy: %v", err)
	}
	defer c.Close()
	if got, _ := io.ReadAll(c); strings.TrimSpace(string(got)) != "hello from app" {
		t.Fatalf("through the port proxy: %q", got)
	}
}

// TestATemplatesEnvFileLaunches (issue 38, Deliver 3): env_file: db.env
// inside the repository (the templates' .env) launches through the real
// CLI with its values, a literal dollar kept, in the database's
// environment; it was refused as an indirect include.
func TestATemplatesEnvFileLaunches(t *testing.T) {
	r, _ := launchable(t, composeExtra{}, nil)
	ws := r.Assignment["workspace"].(map[string]any)["path"].(string)
	if err := os.WriteFile(filepath.Join(ws, ".devcontainer", "db.env"), []byte("POSTGRES_PASSWORD='pa$$word'\nPOSTGRES_DB=app\n"), 0o660); err != nil {
		t.Fatal(err)
	}
	launchRefused(t, r, composeExtra{database: "    env_file: db.env\n"}, "", "")
	got, err := exec.Command("docker", "exec", devcontainer.ProjectName(branchboxtest.RunID)+"-database-1", "sh", "-c", `printf '%s %s' "$POSTGRES_PASSWORD" "$POSTGRES_DB"`).CombinedOutput()
	if err != nil || string(got) != "pa$$word app" {
		t.Fatalf("the database's environment: %q (%v)", got, err)
	}
}
