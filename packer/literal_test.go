package packer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 39, Deliver 1: writeExcludes wrote each ignored path as an rsync
// pattern, where [ ] * ? and \ are wildcards. An ignored
// app/[locale]/.env.local (Next.js's layout) went to the box right after
// the preflight said it "is git-ignored and not sent"; an ignored
// a[b].log left out the tracked ab.log, and an ignored * every file of
// the top; an ignored name with a newline was skipped, so sent. Real git
// and real rsync with the packer's own excludes and arguments: every
// ignored file the preflight lists stays here, every other file arrives.
func TestIgnoredPathsWithWildcardsOrNewlinesAreNotSent(t *testing.T) {
	for _, c := range []struct {
		name             string
		ignored, tracked []string
	}{
		{"next.js locale", []string{"app/[locale]/.env.local"}, []string{"app/[locale]/page.tsx"}},
		{"brackets", []string{"a[b].log"}, []string{"ab.log"}},
		{"star", []string{"*"}, []string{"README.md"}},
		{"question mark", []string{"x?"}, []string{"xy"}},
		{"backslash with a wildcard", []string{"c\\d[1].env"}, []string{"cd1.env"}},
		{"backslash alone", []string{"plain\\back.env"}, []string{"plain\\back.txt"}},
		{"newline", []string{"new\nline.env"}, []string{"new"}},
		{"carriage return", []string{"cr\r.env"}, []string{"cr"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := t.TempDir()
			git(t, top, "init", "-q")
			write(t, top, ".gitignore", ".env*\n*.log\n*.env\n/\\*\n/x\\?\n")
			for _, f := range c.tracked {
				write(t, top, f, "tracked "+f+"\n")
				git(t, top, "add", "-f", "--", ":(literal)"+f)
			}
			git(t, top, "add", ".gitignore")
			git(t, top, "commit", "-q", "-m", "one")
			for _, f := range c.ignored {
				write(t, top, f, "SECRET "+f+"\n")
			}
			repo, err := FindRepo(top)
			if err != nil {
				t.Fatal(err)
			}
			rf, err := listFiles(top)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(rf.ignored, "|") != strings.Join(c.ignored, "|") {
				t.Fatalf("git lists %q as ignored, want %q", rf.ignored, c.ignored)
			}
			p := testPacker(t)
			p.Dirs.Ensure(repo.Key)
			excludes, err := p.writeExcludes(repo, verbResult{resp: map[string]any{}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			copyDir := boxCopy(t, repo, excludes)
			for _, f := range c.ignored {
				if _, err := os.Lstat(filepath.Join(copyDir, f)); err == nil {
					t.Errorf("the ignored %q was sent", f)
				}
			}
			for _, f := range append(c.tracked, ".gitignore") {
				if got, err := os.ReadFile(filepath.Join(copyDir, f)); err != nil || !strings.HasSuffix(string(got), "\n") {
					t.Errorf("the tracked %q did not arrive: %v", f, err)
				}
			}
			if t.Failed() {
				data, _ := os.ReadFile(excludes)
				t.Logf("excludes: %q", data)
			}
		})
	}
}
