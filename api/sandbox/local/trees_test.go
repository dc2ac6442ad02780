package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/state/objects"
	"github.com/cocoonbox/cocoonbox/api/state/snapshot"
	"github.com/cocoonbox/cocoonbox/api/state/store"
)

// The trees a box's save reads are its upper layer over its image as the
// box sees them (a whiteout hides the image's file; the box's ids), and a
// disk filled from the snapshot shows the saved trees and nothing of
// another image's /home/user (docs/state.md, "Box saves"). It mounts
// overlays and sets trusted xattrs: root, as the supervisor runs.
func TestTreesSaveThroughTheOverlayAndFillOpaque(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	image, upper := filepath.Join(tmp, "image"), filepath.Join(tmp, "upper")
	write := func(p, data string, uid int) {
		t.Helper()
		check(t, os.MkdirAll(filepath.Dir(p), 0o755))
		check(t, os.WriteFile(p, []byte(data), 0o644))
		check(t, os.Lchown(p, uid, uid))
	}
	write(filepath.Join(image, "home/user/.bashrc"), "the image's bashrc\n", 1000)
	write(filepath.Join(image, "home/user/removed"), "removed in the box\n", 1000)
	check(t, os.MkdirAll(filepath.Join(image, "workspace"), 0o755))
	write(filepath.Join(upper, "home/user/notes.txt"), "the box's notes\n", 1000)
	check(t, unix.Mknod(filepath.Join(upper, "home/user/removed"), syscall.S_IFCHR, 0)) // a whiteout
	write(filepath.Join(upper, "workspace/app/src/main.go"), "package main\n", 1000)
	write(filepath.Join(upper, "workspace/app/node_modules/dep.js"), "ignored\n", 1000)
	write(filepath.Join(upper, snapshot.ExcludesPath), "/workspace/app/node_modules/\n", 1000)

	st, err := store.OpenDir(filepath.Join(tmp, "store"), "http://127.0.0.1:1", nil)
	check(t, err)
	k, err := objects.NewKeys("u1", make([]byte, 32))
	check(t, err)
	// The box's own overlay holds upper as its upper layer, as a running
	// machine's does while its trees are read.
	live, work := filepath.Join(tmp, "live"), filepath.Join(tmp, "work")
	check(t, os.Mkdir(live, 0o755))
	check(t, os.Mkdir(work, 0o755))
	check(t, unix.Mount("overlay", live, "overlay", 0, "lowerdir="+image+",upperdir="+upper+",workdir="+work+",index=off"))
	defer unix.Unmount(live, unix.MNT_DETACH)
	root := filepath.Join(tmp, "root")
	check(t, os.Mkdir(root, 0o755))
	unmount, err := mountTrees(upper, image, root)
	if err != nil {
		t.Fatalf("mount the trees (the test runs as root): %v", err)
	}
	skip, err := snapshot.BoxSkip(root)
	check(t, err)
	m, _, err := snapshot.Save(ctx, st, k, root, sandbox.TreeDirs, "keeper", "s1", nil, 0, snapshot.Options{Skip: skip})
	unmount()
	check(t, err)

	// The second host's image has a file in /home/user the box never had.
	write(filepath.Join(image, "home/user/another-image"), "not the box's\n", 1000)
	upper2 := filepath.Join(tmp, "upper2")
	check(t, fillUpper(upper2, func(dir string) error {
		_, err := snapshot.Restore(ctx, st, k, m, dir, nil)
		return err
	}))
	if st, err := os.Stat(filepath.Join(upper2, "home")); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("/home of the filled layer: %v %v", st.Mode(), err)
	}
	unmount, err = mountTrees(upper2, image, root)
	check(t, err)
	defer unmount()
	var got []string
	check(t, filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		data, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		got = append(got, fmt.Sprintf("%s %s uid %d", rel, strings.TrimSpace(string(data)), fi.Sys().(*syscall.Stat_t).Uid))
		return nil
	}))
	want := []string{
		"home/user/.bashrc the image's bashrc uid 1000",
		"home/user/.local/share/cocoonbox/offload/excludes /workspace/app/node_modules/ uid 1000",
		"home/user/notes.txt the box's notes uid 1000",
		"workspace/app/src/main.go package main uid 1000",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the trees filled from the snapshot:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// check fails t with err.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
