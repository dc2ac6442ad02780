//go:build booted

package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// layerCopy copies the cached package layer of a tier (image/layer TIER:
// Debian 12 from debootstrap with the tier's packages, before provision) to
// a fresh directory, as image/build does.
func layerCopy(t *testing.T, tier string) (repo, root string) {
	t.Helper()
	testenv.RequireRoot(t, "provision (chown, chroot)")
	repo, err := box.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "out/bin")); err != nil {
		t.Fatalf("no built helpers at out/bin (run `make build` or `make image`): %v", err)
	}
	out, err := exec.Command(filepath.Join(repo, "image/layer"), tier).Output()
	if err != nil {
		t.Fatalf("image/layer %s: %v", tier, err)
	}
	layer := strings.TrimSpace(string(out))
	root = filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", "--reflink=auto", layer, root).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", layer, err, out)
	}
	return repo, root
}

// provision runs image/provision --tier TIER on root and returns its exit
// code and its output.
func provision(t *testing.T, repo, root, tier string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repo, "image/provision"), "--tier", tier, "--bin", filepath.Join(repo, "out/bin"), root)
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("image/provision: %v", err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// listing describes every entry under root, one line each: path, type and
// mode, owner, size, mtime (ns), and the sha256 of a file's content or a
// link's target.
func listing(t *testing.T, root string) map[string]string {
	t.Helper()
	entries := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		sum := ""
		switch {
		case info.Mode().IsRegular():
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			sum = hex.EncodeToString(h.Sum(nil))
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			sum = "-> " + target
		}
		rel, _ := filepath.Rel(root, path)
		entries[rel] = fmt.Sprintf("%v %d:%d %d %d.%09d %s", info.Mode(), st.Uid, st.Gid, info.Size(),
			st.Mtim.Sec, st.Mtim.Nsec, sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// Provision run twice on the same root changes nothing the second time:
// no path, mode, owner, size, content or mtime differs. For the desk tier
// too, whose session unit replaces the base stand-in as the package's
// diversion does (the stand-in kept at PATH.cocoonbox-guest).
func TestProvisionRunTwiceChangesNothingTheSecondTime(t *testing.T) {
	t.Parallel()
	for _, tier := range []string{"base", "desk"} {
		t.Run(tier, func(t *testing.T) {
			t.Parallel()
			provisionTwice(t, tier)
		})
	}
}

func provisionTwice(t *testing.T, tier string) {
	repo, root := layerCopy(t, tier)
	if code, out := provision(t, repo, root, tier); code != 0 {
		t.Fatalf("first provision: exit %d\n%s", code, out)
	}
	first := listing(t, root)
	if _, ok := first["etc/polkit-1/rules.d/60-cocoonbox-cbagent.rules"]; !ok {
		t.Fatal("the first provision did not install the polkit rule; the comparison would prove nothing")
	}
	if tier == "desk" {
		for path, unit := range map[string]string{
			"usr/lib/systemd/system/cocoonbox-session.service":                 "units/desk/system/cocoonbox-session.service",
			"usr/lib/systemd/system/cocoonbox-session.service.cocoonbox-guest": "units/system/cocoonbox-session.service",
		} {
			want, err := os.ReadFile(filepath.Join(repo, unit))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(filepath.Join(root, path)); err != nil || string(got) != string(want) {
				t.Errorf("provision --tier desk: /%s is not %s (%v)", path, unit, err)
			}
		}
	}
	if code, out := provision(t, repo, root, tier); code != 0 {
		t.Fatalf("second provision: exit %d\n%s", code, out)
	}
	second := listing(t, root)
	var diffs []string
	for p, a := range first {
		if b, ok := second[p]; !ok {
			diffs = append(diffs, "removed "+p)
		} else if a != b {
			diffs = append(diffs, fmt.Sprintf("changed %s\n    %s\n    %s", p, a, b))
		}
	}
	for p := range second {
		if _, ok := first[p]; !ok {
			diffs = append(diffs, "added "+p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the second provision changed %d entries:\n%s", len(diffs), strings.Join(diffs, "\n"))
	}
	t.Logf("%d entries compared", len(first))
}

// Provision on a root missing a required package (one of
// image/tiers/base.packages, really removed with dpkg) fails naming it,
// before it changes anything.
func TestProvisionRefusesARootMissingARequiredPackage(t *testing.T) {
	t.Parallel()
	repo, root := layerCopy(t, "base")
	if out, err := exec.Command("chroot", root, "dpkg", "--remove", "tmux").CombinedOutput(); err != nil {
		t.Fatalf("dpkg --remove tmux in the copy: %v\n%s", err, out)
	}
	code, out := provision(t, repo, root, "base")
	if code == 0 {
		t.Fatalf("provision of a root without tmux succeeded:\n%s", out)
	}
	if !strings.Contains(out, "'tmux'") {
		t.Errorf("provision failed (exit %d) without naming the package tmux:\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/polkit-1/rules.d/60-cocoonbox-cbagent.rules")); err == nil {
		t.Error("the refused provision installed files anyway")
	}
}
