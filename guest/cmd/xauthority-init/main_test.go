package main

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The file is what xauth(1) reads as one FamilyWild entry for display 0
// with the cookie: the line the shell script this replaces fed to
// `xauth nmerge`.
func TestTheCookieIsOneFamilyWildEntryXauthReads(t *testing.T) {
	xauth, err := exec.LookPath("xauth")
	if err != nil {
		t.Fatal("xauth is not installed (Debian package xauth; make setup installs it)")
	}
	dir := t.TempDir()
	dest := filepath.Join(dir, "Xauthority")
	cookie := []byte("0123456789abcdef")
	if err := writeCookie(dir, dest, os.Getgid(), cookie); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(xauth, "-f", dest, "nlist").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "ffff 0000  0001 30 0012 " + hex.EncodeToString([]byte("MIT-MAGIC-COOKIE-1")) + " 0010 " + hex.EncodeToString(cookie) + "\n"
	if string(out) != want {
		t.Errorf("xauth nlist says\n%q, want\n%q", out, want)
	}
}

// Mode 0640 and the group given, set on the descriptor; a symlink standing
// at the name is replaced, not followed; a directory there is refused; the
// work directory is gone afterwards.
func TestTheCookieReplacesASymlinkAndLeavesNothingBehind(t *testing.T) {
	parent, dir := t.TempDir(), t.TempDir()
	dest := filepath.Join(dir, "Xauthority")
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, dest); err != nil {
		t.Fatal(err)
	}
	if err := writeCookie(parent, dest, os.Getgid(), make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 || int(fi.Sys().(*syscall.Stat_t).Gid) != os.Getgid() {
		t.Errorf("the cookie is %v gid %d, want a regular file 0640 of gid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid, os.Getgid())
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep" {
		t.Errorf("the symlink's target was written: %q", data)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("the work directory is left in %s: %v", parent, left)
	}

	// A directory at the name (user may make one): refused, kept.
	if err := os.Remove(dest); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dest, 0o700); err != nil {
		t.Fatal(err)
	}
	err = writeCookie(parent, dest, os.Getgid(), make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "putting the cookie in place") {
		t.Errorf("writing over a directory: %v, want a refusal", err)
	}
	if fi, err := os.Lstat(dest); err != nil || !fi.IsDir() {
		t.Errorf("the directory at the name is gone or changed: %v %v", fi, err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("the work directory is left in %s after a failure: %v", parent, left)
	}
}
