//go:build booted

package foundation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// The image tar is importable by a real Docker engine, and the image knows
// its own name.
func TestImageTarImportsIntoDockerAndKnowsItsVersion(t *testing.T) {
	img := box.Image(t)
	tar := img + ".tar"
	if _, err := os.Stat(tar); err != nil {
		t.Fatalf("image tar: %v (run `make image`)", err)
	}
	root, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(root, "tests/services")).CombinedOutput(); err != nil {
		t.Fatalf("starting dockerd (tests/services): %v\n%s", err, out)
	}
	want, err := os.ReadFile(filepath.Join(img, "etc/cocoonbox/image"))
	if err != nil {
		t.Fatal(err)
	}
	tag := "cocoonbox-test/" + filepath.Base(img) + ":import-test"
	if out, err := exec.Command("docker", "import", tar, tag).CombinedOutput(); err != nil {
		t.Fatalf("docker import %s: %v\n%s", tar, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag).Run() })
	out, err := exec.Command("docker", "run", "--rm", "--network=none", tag, "cat", "/etc/cocoonbox/image").CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	if string(out) != string(want) {
		t.Fatalf("docker run cat /etc/cocoonbox/image = %q, want %q", out, want)
	}
	if !strings.HasPrefix(string(out), "cbdesk:v") {
		t.Fatalf("image name %q does not start with cbdesk:v", out)
	}
}
