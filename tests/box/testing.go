package box

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

// ImageEnv names the environment variable that points the booted-box tests
// at an image root; `make box-test` sets it to the image it just built.
const ImageEnv = "COCOONBOX_IMAGE"

// Image returns the image root the tests boot: $COCOONBOX_IMAGE, else the
// base image of the version in image/VERSION under out/images. A missing
// image fails the test (build it with `make image`); only a host that cannot
// boot boxes at all skips, and under make test it fails (testenv). A test
// binary built without the booted tag fails (testenv.ErrUntagged): the
// file that boots lacks it.
func Image(t testing.TB) string {
	t.Helper()
	requireTag(t)
	if err := CanBoot(); err != nil {
		testenv.SkipOrFail(t, "booted-box test cannot run: "+err.Error())
	}
	if img := os.Getenv(ImageEnv); img != "" {
		return img
	}
	root, v, err := ImageVersion()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "out/images", fmt.Sprintf("cbdesk-v%s-base", v))
}

// requireTag fails a test that boots in a binary built without the booted
// tag: its file lacks it, so make unit-test would boot it.
func requireTag(t testing.TB) {
	t.Helper()
	if !testenv.Booted {
		t.Fatal(testenv.ErrUntagged)
	}
}

// ImageVersion is the repository root (RepoRoot) and its image/VERSION,
// the N of the cbdesk:vN this tree builds.
func ImageVersion() (root, version string, err error) {
	if root, err = RepoRoot(); err != nil {
		return "", "", err
	}
	v, err := os.ReadFile(filepath.Join(root, "image/VERSION"))
	return root, strings.TrimSpace(string(v)), err
}

// RepoRoot finds the repository root: the nearest directory above the
// working directory that holds image/VERSION.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "image/VERSION")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (with image/VERSION) not found above the working directory")
		}
		dir = parent
	}
}

// Boot boots a throwaway box of the test image (or opts.Image when set)
// and stops it when the test ends; without the booted tag it fails
// (testenv.ErrUntagged). When the test failed, the box's
// `systemctl --failed` and `journalctl -m` go into the test log first.
func Boot(t testing.TB, opts Options) *Box {
	t.Helper()
	requireTag(t)
	if opts.Image == "" {
		opts.Image = Image(t)
	}
	b, err := Start(context.Background(), opts)
	if errors.Is(err, ErrCannotBoot) {
		testenv.SkipOrFail(t, "booted-box test cannot run: "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(b.Diagnostics(400))
		}
		b.Stop()
		if !t.Failed() {
			os.Remove(b.Console)
		} else {
			t.Logf("box %s console log kept at %s", b.Name, b.Console)
		}
	})
	return b
}

// Must runs a program as root in the box and fails the test on a non-zero
// exit; it returns stdout.
func (b *Box) Must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := b.Run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// MustSh is Must for a shell command line.
func (b *Box) MustSh(t testing.TB, line string) string {
	t.Helper()
	out, err := b.Sh(line)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
