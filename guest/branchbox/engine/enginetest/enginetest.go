// Package enginetest gives tests a real Docker engine and images in it,
// imported from tiny root trees (nothing can be pulled here).
package enginetest

import (
	"archive/tar"
	"bytes"
	"os"
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

// Start starts the test engine (tests/services, as make box-test does)
// when it is not running.
func Start(t testing.TB) {
	t.Helper()
	// Serialized: packages testing in parallel must not start two dockerd.
	if out, err := exec.Command("flock", "-o", "/tmp/cocoonbox-dockerd-start.lock", services()).CombinedOutput(); err != nil {
		t.Fatalf("starting dockerd (tests/services): %v\n%s", err, out)
	}
}

// entry is one file of a root tree: a regular file (body), a directory
// (dir) or a symlink (link).
type entry struct {
	name, body, link string
	dir              bool
	mode             int64
	uid              int
}

// ImportImage imports a one-file root tree as a new image, returning its
// sha256: Id; the image is removed at cleanup.
func ImportImage(t testing.TB) string {
	t.Helper()
	return importTree(t, []entry{{name: "hello", body: "branchbox engine test\n", mode: 0o644}})
}

// ShellImage imports a root tree that runs: Debian's static busybox as
// /bin/sh and every applet (id, sleep, cat, nc, ...), /etc/passwd with
// root, dev (UID 1000, the example's consumer_uid) and other (1001), and
// an /etc/os-release the Dev Containers CLI reads. Its sha256: Id is
// removed at cleanup. make setup installs busybox-static.
func ShellImage(t testing.TB) string {
	t.Helper()
	return importTree(t, shellTree(t))
}

// StandInImage is ShellImage with Dockerfile changes (`USER dev`, a CMD):
// a local stand-in for an image that cannot be pulled here (a
// database's, a template's app).
func StandInImage(t testing.TB, changes ...string) string {
	t.Helper()
	return importTree(t, shellTree(t), changes...)
}

// ProxyScript is the test port proxy's entrypoint: for each argument
// HOST:TARGET:RUNTIME (as engine.StartProxy passes them) busybox nc
// listens on HOST and pipes each connection to TARGET:RUNTIME.
const ProxyScript = `for spec; do
	port=${spec%%:*}; rest=${spec#*:}
	nc -ll -p "$port" -e nc "${rest%%:*}" "${rest#*:}" &
done
wait
`

// ProxyImage is ShellImage with ProxyScript as its entrypoint: a port
// proxy image of the interface BranchBox starts one with.
func ProxyImage(t testing.TB) string {
	t.Helper()
	es := append(shellTree(t), entry{name: "proxy", body: ProxyScript, mode: 0o755})
	return importTree(t, es, `ENTRYPOINT ["/bin/sh", "/proxy"]`)
}

// shellTree is ShellImage's root tree.
func shellTree(t testing.TB) []entry {
	t.Helper()
	bb, err := os.ReadFile("/usr/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static (make setup installs it): %v", err)
	}
	list, err := exec.Command("/usr/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	es := []entry{
		{name: "bin", dir: true, mode: 0o755}, {name: "etc", dir: true, mode: 0o755}, {name: "home", dir: true, mode: 0o755},
		{name: "home/dev", dir: true, mode: 0o755, uid: 1000}, {name: "root", dir: true, mode: 0o700},
		{name: "tmp", dir: true, mode: 0o1777}, {name: "bin/busybox", body: string(bb), mode: 0o755},
		{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\ndev:x:1000:1000:dev:/home/dev:/bin/sh\nother:x:1001:1001::/tmp:/bin/sh\n", mode: 0o644},
		{name: "etc/group", body: "root:x:0:\ndev:x:1000:\nother:x:1001:\n", mode: 0o644},
		{name: "etc/os-release", body: "ID=busybox\nNAME=BranchBox test\n", mode: 0o644},
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "busybox" {
			es = append(es, entry{name: "bin/" + applet, link: "busybox"})
		}
	}
	return es
}

// importTree imports the tree (after starting the engine) with the
// Dockerfile changes given and returns the image's Id, removed at cleanup.
func importTree(t testing.TB, es []entry, changes ...string) string {
	t.Helper()
	Start(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.link, 0, 0o777
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	cmd := exec.Command("docker", append(args, "-")...)
	cmd.Stdin = &buf
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker import: %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", id).Run() })
	return id
}
