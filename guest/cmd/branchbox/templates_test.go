package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/feature"
)

// templates is the devcontainers/templates corpus package devcontainer
// keeps.
const templates = "../../branchbox/devcontainer/testdata/templates"

// TestTheDatabaseTemplatesLaunch (issue 38, Must show): the postgres,
// MariaDB (php-mariadb) and Mongo (javascript-node-mongo) templates, as
// published, launch through the real CLI and engine with local stand-in
// images (nothing can be pulled here: the app runs as dev, the database
// answers on its port), and from the primary, which shares the
// database's network namespace (network_mode: service:db), the workspace
// is at /workspaces/<its basename> and the database answers on
// localhost.
func TestTheDatabaseTemplatesLaunch(t *testing.T) {
	for _, c := range []struct {
		template string
		port     int
	}{{"postgres", 5432}, {"php-mariadb", 3306}, {"javascript-node-mongo", 27017}} {
		t.Run(c.template, func(t *testing.T) {
			files := map[string]string{}
			dir := filepath.Join(templates, c.template, ".devcontainer")
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				body, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				files[".devcontainer/"+e.Name()] = string(body)
			}
			app := enginetest.StandInImage(t, "USER dev")
			db := enginetest.StandInImage(t, fmt.Sprintf(`CMD ["nc", "-ll", "-p", "%d", "-e", "echo", "%s database"]`, c.port, c.template))
			r := launchableFiles(t, files, func(m map[string]any) {
				m["service_images"] = map[string]any{"app": app, "db": db}
				delete(m, "published_ports")
				delete(m, "port_proxy_image")
			})
			out, errs, code := runIn("feature", "launch", "coding-demo", "--root", r.Root, "--devcontainer-cli", devcontainerCLI, "--json")
			var res struct{ Launch feature.Record }
			if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil {
				t.Fatalf("launch: exit %d (%v): %s%s", code, err, out, errs)
			}
			ws := filepath.Base(r.Assignment["workspace"].(map[string]any)["path"].(string))
			for script, want := range map[string]string{
				"cat /workspaces/" + ws + "/README":    "app",
				fmt.Sprintf("nc 127.0.0.1 %d", c.port): c.template + " database",
			} {
				if got, err := inContainer(t, res.Launch.Container, "dev", script); err != nil || got != want {
					t.Errorf("%s: %q (%v), want %q", script, got, err, want)
				}
			}
		})
	}
}
