package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A machine's disk is the image root as the lower layer of an overlayfs
// and the machine's own upper layer (StateDir/machines/ID/upper): what the
// box changes lands there, the image stays shared and untouched. A save is
// a tar of the upper layer (xattrs kept: overlayfs marks whiteouts and
// opaque directories with them); a rebase keeps the upper layer's
// /home/user and /workspace and mounts them over the new image.

// mountRoot mounts dir's root: the image and dir's upper layer, each
// idmapped to the box's uid range (userns.go), as one overlay. The layers'
// own mounts are detached once the overlay holds them, so the overlay is
// the one mount a teardown or a crashed run's cleanup has to find; they
// are made under layerDir, never under a directory a delete removes: a
// crash between two steps must not leave the image mounted where
// os.RemoveAll would descend into it.
func mountRoot(dir, image string, uids *uidRange) error {
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	ns, err := uids.userNSFile()
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := os.MkdirAll(layerDir, 0o700); err != nil {
		return err
	}
	layers, err := os.MkdirTemp(layerDir, "")
	if err != nil {
		return err
	}
	defer os.Remove(layers)
	lower, disk := filepath.Join(layers, "image"), filepath.Join(layers, "disk")
	for _, d := range []string{lower, disk} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		defer os.Remove(d)
	}
	if err := bindIdmapped(image, lower, ns); err != nil {
		return err
	}
	defer unix.Unmount(lower, unix.MNT_DETACH)
	if err := bindIdmapped(dir, disk, ns); err != nil {
		return err
	}
	defer unix.Unmount(disk, unix.MNT_DETACH)
	// index=off: a rebase puts the upper layer over another lower one, which
	// the index would refuse as a different origin.
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,index=off",
		lower, filepath.Join(disk, "upper"), filepath.Join(disk, "work"))
	err = asRangeRoot(uids.Base, func() error {
		return unix.Mount("overlay", filepath.Join(dir, "root"), "overlay", 0, opts)
	})
	if err != nil {
		return fmt.Errorf("mount the overlay of %s on %s: %w", image, dir, err)
	}
	return nil
}

// layerDir holds the idmapped layers' mount points for the moment of an
// overlay's mount (mountRoot).
var layerDir = "/run/cocoonbox/layers"

func unmountRoot(dir string) error {
	err := unix.Unmount(filepath.Join(dir, "root"), unix.MNT_DETACH)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil // not mounted
	}
	return err
}

// tarUpper writes the upper layer of dir to the tar file out.
func tarUpper(dir, out string) error {
	cmd := exec.Command("tar", "--create", "--file", out, "--xattrs", "--xattrs-include=*",
		"--acls", "--numeric-owner", "--sparse", "-C", filepath.Join(dir, "upper"), ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tar the disk of %s: %w: %s", dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// untarUpper makes dir's upper layer from a tar file.
func untarUpper(tarFile, dir string) error {
	upper := filepath.Join(dir, "upper")
	if err := os.MkdirAll(upper, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("tar", "--extract", "--file", tarFile, "--xattrs", "--xattrs-include=*",
		"--acls", "--numeric-owner", "--same-permissions", "-C", upper)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("untar %s: %w: %s", tarFile, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// copyUpper copies src's upper layer to dst's, xattrs and all.
func copyUpper(src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	cmd := exec.Command("cp", "-a", "--reflink=auto", filepath.Join(src, "upper"), filepath.Join(dst, "upper"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("copy the disk of %s: %w: %s", src, err, strings.TrimSpace(string(b)))
	}
	return nil
}

// keptOnRebase are the paths of the user's state a rebase carries over.
var keptOnRebase = []string{"home/user", "workspace"}

// rebaseUpper replaces dir's upper layer by one holding only the kept
// paths of the old one (moved, not copied: same file system), and drops
// the rest. The root must be unmounted.
func rebaseUpper(dir string) error {
	old, fresh := filepath.Join(dir, "upper"), filepath.Join(dir, "upper.rebase")
	if err := os.RemoveAll(fresh); err != nil {
		return err
	}
	if err := os.MkdirAll(fresh, 0o755); err != nil {
		return err
	}
	for _, p := range keptOnRebase {
		from := filepath.Join(old, p)
		st, err := os.Lstat(from)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !st.IsDir() {
			continue // a file or link where a directory belongs: not state to keep
		}
		to := filepath.Join(fresh, p)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("keep %s: %w", p, err)
		}
	}
	trash := filepath.Join(dir, "upper.old")
	if err := os.Rename(old, trash); err != nil {
		return err
	}
	if err := os.Rename(fresh, old); err != nil {
		return err
	}
	// The overlay's work directory belongs to the old layer pair.
	if err := os.RemoveAll(filepath.Join(dir, "work")); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}

// resetMachineID empties /etc/machine-id in dir's upper layer, so the box's
// systemd makes a new one at its next boot. The layer is the box's own
// writing: every component is opened without following a link.
func resetMachineID(dir string) error {
	upper, err := unix.Open(filepath.Join(dir, "upper"), unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(upper)
	how := &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	etc, err := unix.Openat2(upper, "etc", how)
	if errors.Is(err, unix.ENOENT) {
		return nil // the image's own /etc/machine-id, which is empty
	}
	if err != nil {
		return fmt.Errorf("open upper/etc: %w", err)
	}
	defer unix.Close(etc)
	if err := unix.Unlinkat(etc, "machine-id", 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove upper/etc/machine-id: %w", err)
	}
	fd, err := unix.Openat(etc, "machine-id", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return fmt.Errorf("create upper/etc/machine-id: %w", err)
	}
	return unix.Close(fd)
}
