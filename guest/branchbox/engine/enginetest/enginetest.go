// Package enginetest gives tests a real Docker engine and images in it,
// imported from tiny root trees (nothing can be pulled here).
package enginetest

import (
	"archive/tar"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// services is tests/services of this checkout, which starts dockerd when
// it is not running (make setup installs it).
func services() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "../../../../tests/services")
}

// ImportImage starts the test engine (tests/services, as make box-test
// does) and imports a one-file root tree as a new image (nothing can be
// pulled here), returning its sha256: Id; the image is removed at cleanup.
func ImportImage(t *testing.T) string {
	t.Helper()
	// Serialized: packages testing in parallel must not start two dockerd.
	if out, err := exec.Command("flock", "-o", "/tmp/cocoonbox-dockerd-start.lock", services()).CombinedOutput(); err != nil {
		t.Fatalf("starting dockerd (tests/services): %v\n%s", err, out)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("branchbox engine test\n")
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker", "import", "-")
	cmd.Stdin = &buf
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker import: %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
	return id
}
