package packages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
)

const statusFixture = `Package: dpkg
Status: install ok installed
Architecture: amd64
Description: the package manager
 with a continuation line: Package: fake

Package: hello
Status: install ok installed
Architecture: amd64

Package: libfoo
Status: install ok installed
Architecture: i386

Package: tzdata
Status: install ok installed
Architecture: all

Package: libauto
Status: install ok installed
Architecture: amd64

Package: allauto
Status: install ok installed
Architecture: all

Package: removed
Status: deinstall ok config-files
Architecture: amd64

Package: gone
Status: purge ok not-installed
Architecture: amd64

Package: halfway
Status: install ok unpacked
Architecture: amd64
`

const extendedFixture = `Package: libauto
Architecture: amd64
Auto-Installed: 1

Package: allauto
Architecture: amd64
Auto-Installed: 1

Package: hello
Architecture: amd64
Auto-Installed: 0
`

func TestManualNamesPackagesLikeAptMark(t *testing.T) {
	dir := t.TempDir()
	status, ext := filepath.Join(dir, "status"), filepath.Join(dir, "extended_states")
	os.WriteFile(status, []byte(statusFixture), 0o644)
	os.WriteFile(ext, []byte(extendedFixture), 0o644)
	got, err := Manual(status, ext)
	if err != nil {
		t.Fatal(err)
	}
	want := "dpkg,halfway,hello,libfoo:i386,tzdata"
	if strings.Join(got, ",") != want {
		t.Errorf("Manual = %v, want %s", got, want)
	}
	// Without extended_states nothing is automatic.
	got, err = Manual(status, filepath.Join(dir, "none"))
	if err != nil || len(got) != 7 {
		t.Errorf("without extended_states: %v %v", got, err)
	}
	if _, err := Manual(filepath.Join(dir, "none"), ext); err == nil {
		t.Error("a missing dpkg status gave no error")
	}
}

// TestManualMatchesAptMarkShowmanual compares with apt-mark itself on this
// machine's real dpkg and apt databases.
func TestManualMatchesAptMarkShowmanual(t *testing.T) {
	if _, err := exec.LookPath("apt-mark"); err != nil {
		testenv.SkipOrFail(t, "no apt-mark on this machine (Debian has it: make test runs there)")
	}
	out, err := exec.Command("apt-mark", "showmanual").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Manual(DpkgStatus, ExtendedStates)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(out))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Manual differs from apt-mark showmanual:\n got %d: %v\nwant %d: %v", len(got), got, len(want), want)
	}
}

func TestBeyond(t *testing.T) {
	got := Beyond([]string{"a1", "b2", "c3", "d4"}, []string{"b2", "d4", "zz"})
	if strings.Join(got, ",") != "a1,c3" {
		t.Errorf("Beyond = %v", got)
	}
}
