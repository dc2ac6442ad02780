// Package localtest holds what tests of the local supervisor's users need
// to set it up: an image catalog with two versions of the base image.
package localtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Catalog makes a test's image catalog in dir (made when missing):
// cbdesk-v1-base links to the built base image root, cbdesk-v1-desk to
// the desk one (when desk is set), and cbdesk-v2-base is a hard-linked copy
// of base whose /etc/cocoonbox/image says cbdesk:v2, so a rebase has
// somewhere to go. It answers the first line of base's own stamp
// (cbdesk:v<image/VERSION>), which the catalog serves as v1.
func Catalog(dir, base, desk string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	link := func(target, name string) error {
		p := filepath.Join(dir, name)
		os.Remove(p)
		return os.Symlink(target, p)
	}
	if err := link(base, "cbdesk-v1-base"); err != nil {
		return "", err
	}
	stampData, err := os.ReadFile(filepath.Join(base, "etc/cocoonbox/image"))
	if err != nil {
		return "", fmt.Errorf("the base image has no stamp: %w", err)
	}
	stamp, _, _ := strings.Cut(string(stampData), "\n")
	if desk != "" {
		if err := link(desk, "cbdesk-v1-desk"); err != nil {
			return "", err
		}
	}
	v2dir := filepath.Join(dir, "cbdesk-v2-base")
	if err := os.RemoveAll(v2dir); err != nil {
		return "", err
	}
	if out, err := exec.Command("cp", "-al", base, v2dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy the base image as v2: %v: %s", err, out)
	}
	v2stamp := filepath.Join(v2dir, "etc/cocoonbox/image")
	os.Remove(v2stamp) // break the hard link before writing
	return stamp, os.WriteFile(v2stamp, []byte("cbdesk:v2\ntier=base\nrevision=test\n"), 0o644)
}
