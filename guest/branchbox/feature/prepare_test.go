package feature

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/devcontainer"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/engine/enginetest"
)

func repository(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	files := map[string]string{
		".devcontainer.json": `{"dockerComposeFile": "compose.yaml", "service": "app", "workspaceFolder": "/workspaces/app"}`,
		"compose.yaml":       "services:\n  app:\n    build: .\n  database:\n    image: postgres\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repo
}

// TestPrepareMissingImageWritesNothing (Contract: Preloaded service
// images, "A missing image therefore fails the assignment instead of
// building or pulling"): with both images in the engine the facade is
// written; with the port proxy image or a service image missing, the
// assignment fails by rule local-image-inspect and no facade exists.
func TestPrepareMissingImageWritesNothing(t *testing.T) {
	app, db := enginetest.ImportImage(t), enginetest.ImportImage(t)
	c, err := engine.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uid := uint32(1000)
	assignment := func() *branchbox.Assignment {
		return &branchbox.Assignment{Version: "3", RunID: "run-id", Workspace: &branchbox.Workspace{ConsumerUID: &uid},
			ServiceImages: map[string]string{"app": app, "database": db}}
	}
	repo := repository(t)
	dir := filepath.Join(t.TempDir(), "facade")
	if _, _, err := Prepare(context.Background(), c, assignment(), repo, dir); err != nil {
		t.Fatalf("control case: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, devcontainer.ComposeFile)); err != nil {
		t.Fatalf("facade not written: %v", err)
	}
	missing := "sha256:" + strings.Repeat("0", 64)
	for name, edit := range map[string]func(*branchbox.Assignment){
		"service image": func(a *branchbox.Assignment) { a.ServiceImages["database"] = missing },
		"port proxy image": func(a *branchbox.Assignment) {
			a.PublishedPorts = []branchbox.PublishedPort{{Host: 3000, Runtime: 3000}}
			a.PortProxyImage = missing
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := assignment()
			edit(a)
			dir := filepath.Join(t.TempDir(), "facade")
			_, _, err := Prepare(context.Background(), c, a, repo, dir)
			if branchbox.RuleOf(err) != branchbox.RuleLocalImage {
				t.Fatalf("got %v, want rule %s", err, branchbox.RuleLocalImage)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a facade directory exists after the refusal: %v", err)
			}
		})
	}
}
