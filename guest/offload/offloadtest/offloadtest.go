// Package offloadtest holds what the offload tests of both sides share
// (guest/offload/inbox, tests/offload, packer,
// api/e2e/offload): git in a test repository, the repository state a step
// must leave as it was, a send stream from members, a valid hand-over.
// Only tests import it.
package offloadtest

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/offload"
)

// Git runs git in dir with a test identity and main as the default
// branch, fails the test on an error, and returns the trimmed output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@invalid", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TarOf builds a send stream of name → content, in the given order.
func TarOf(t testing.TB, members ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		if err := tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o600, Size: int64(len(m[1])), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(m[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Handover is a valid hand-over for a test task (Contract: Offload,
// Hand-over), every section "none" and then the extra lines.
func Handover(task string, extra ...string) string {
	var b strings.Builder
	b.WriteString("# Hand-over: " + task + "\n")
	for _, h := range offload.HandoverHeadings {
		b.WriteString(h + "\nnone\n")
	}
	for _, l := range extra {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// Write writes content to dir/name (0644), making its directories.
func Write(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Read is dir/name's content; a missing file fails the test.
func Read(t testing.TB, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// State is what an offload, a refused back or the branch path must leave
// as it was in the repository top: HEAD, the branches (but back's
// cocoonbox/back-*), the index, the status with ignored files and the
// diffs.
func State(t testing.TB, top string) string {
	t.Helper()
	var branches []string
	for _, l := range strings.Split(Git(t, top, "for-each-ref", "refs/heads"), "\n") {
		if !strings.Contains(l, "refs/heads/cocoonbox/") {
			branches = append(branches, l)
		}
	}
	return strings.Join([]string{
		Git(t, top, "rev-parse", "HEAD"),
		strings.Join(branches, "\n"),
		Git(t, top, "ls-files", "-s"),
		Git(t, top, "status", "--porcelain", "--untracked-files=all", "--ignored"),
		Git(t, top, "diff", "--cached"), Git(t, top, "diff"),
	}, "\n")
}
