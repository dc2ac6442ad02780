package box

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Answer runs one of the repository's scripts (script is relative to the
// root: "tests/deb/plain-root") with env added to the test's environment
// and returns its answer: its stdout, which must be exactly one line. Its
// progress goes to stderr, which only the error carries: a test that read
// both streams as the answer took a cold cache's whole debootstrap log for
// a path (issue 25).
func Answer(t testing.TB, env []string, script string, args ...string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, script), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, stderr.String())
	}
	answer, ok := strings.CutSuffix(string(out), "\n")
	if !ok || answer == "" || strings.Contains(answer, "\n") {
		t.Fatalf("%s %s: stdout is %q, want its answer alone on one line (progress belongs on stderr, which had %q)",
			script, strings.Join(args, " "), out, stderr.String())
	}
	return answer
}

// StandIn writes an executable shell script name into dir (a directory the
// test puts first on PATH) with body after its #!/bin/sh line: a stand-in
// for a slow tool (debootstrap, npm, go build) whose caller's own logic a
// cold-cache test runs for real.
func StandIn(t testing.TB, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// PathFirst is a PATH= entry with dir before the test's own PATH.
func PathFirst(dir string) string { return fmt.Sprintf("PATH=%s:%s", dir, os.Getenv("PATH")) }
