package branchboxtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Dir0755 makes a new directory, mode 0755, under /tmp (so users other
// than root can reach what is below it), removed after the test.
func Dir0755(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bbw-")
	must(t, err)
	must(t, os.Chmod(d, 0o755))
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// Git runs git in dir with no ambient configuration and returns its output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=test", "-c", "user.email=test@example.invalid"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Repo makes a real repository snapshot (a README and src/main.go in one
// commit) in a 0755 directory and returns its path and the commit id.
func Repo(t testing.TB) (path, commit string) {
	t.Helper()
	return RepoFiles(t, nil)
}

// RepoFiles is Repo with more files (repository-relative name → body) in
// the one commit.
func RepoFiles(t testing.TB, files map[string]string) (path, commit string) {
	t.Helper()
	path = filepath.Join(Dir0755(t), "app")
	must(t, os.Mkdir(path, 0o755))
	Git(t, path, "init", "-q", "-b", "main")
	all := map[string]string{"README": "app\n", "src/main.go": "package main\n"}
	for name, body := range files {
		all[name] = body
	}
	for name, body := range all {
		must(t, os.MkdirAll(filepath.Join(path, filepath.Dir(name)), 0o755))
		must(t, os.WriteFile(filepath.Join(path, name), []byte(body), 0o644))
	}
	Git(t, path, "add", ".")
	Git(t, path, "commit", "-q", "-m", "snapshot")
	return path, Git(t, path, "rev-parse", "HEAD")
}

// WithRepo is a Lay edit: the assignment points at a fresh Repo and a
// workspace in a new 0755 directory.
func WithRepo(t testing.TB, edit func(m map[string]any)) func(m map[string]any) {
	return WithRepoFiles(t, nil, edit)
}

// WithRepoFiles is WithRepo of a RepoFiles snapshot.
func WithRepoFiles(t testing.TB, files map[string]string, edit func(m map[string]any)) func(m map[string]any) {
	return func(m map[string]any) {
		repo, commit := RepoFiles(t, files)
		m["repository"] = map[string]any{"path": repo, "base": commit}
		m["workspace"].(map[string]any)["path"] = filepath.Join(Dir0755(t), "coding-demo")
		if edit != nil {
			edit(m)
		}
	}
}
