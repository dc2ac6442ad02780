package desktop

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// realSave is a save xfce4-session 4.18 wrote in a desk box (host cbdesk1):
// a terminal in /home/user/work/deep, Thunar, and the session's own clients.
func realSave(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/cbdesk1-display0.save")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDisplayNumber(t *testing.T) {
	for in, want := range map[string]string{":0": "0", ":0.0": "0", "unix:0": "0", "host:12.1": "12"} {
		got, err := DisplayNumber(in)
		if err != nil || got != want {
			t.Errorf("DisplayNumber(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", ":", ":x", ":0x", "host"} {
		if _, err := DisplayNumber(bad); err == nil {
			t.Errorf("DisplayNumber(%q) took a bad display name", bad)
		}
	}
}

func TestParseSessionReadsARealSave(t *testing.T) {
	s, err := ParseSession(realSave(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "Default" {
		t.Errorf("session name %q, want Default", s.Name)
	}
	want := []string{"xfwm4", "xfsettingsd", "xfce4-panel", "Thunar", "xfdesktop", "xfce4-terminal"}
	if got := s.Programs(); !reflect.DeepEqual(got, want) {
		t.Errorf("programs %q, want %q", got, want)
	}
	term := s.Clients[5]
	if term.Hostname != "local/cbdesk1" {
		t.Errorf("terminal hostname %q", term.Hostname)
	}
	if i := indexOf(term.RestartCommand, "--working-directory"); i < 0 || term.RestartCommand[i+1] != "/home/user/work/deep" {
		t.Errorf("terminal restart command lost its directory: %q", term.RestartCommand)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestParseSessionRefusesWhatIsNoSave(t *testing.T) {
	for name, data := range map[string]string{
		"empty":       "",
		"other group": "[General]\nCount=1\n",
		"torn header": "[Session: Default\n",
		"not key=val": "[Session: Default]\nClient0_Program\n",
	} {
		if _, err := ParseSession([]byte(data)); err == nil {
			t.Errorf("%s: ParseSession took %q", name, data)
		}
	}
}

func TestSplitListUnescapesCommas(t *testing.T) {
	got := splitList(`a,b\,c,,d`)
	want := []string{"a", "b,c", "", "d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitList = %q, want %q", got, want)
	}
}

func writeAt(t *testing.T, path, data string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestAdoptCopiesTheNewestSaveToTheCurrentHost(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	newer := time.Now().Add(-time.Minute)
	writeAt(t, filepath.Join(dir, "xfce4-session-cb-old:0"), "[Session: Default]\nClient0_Program=old\n", old)
	writeAt(t, filepath.Join(dir, "xfce4-session-cb-prev:0"), string(realSave(t)), newer)
	writeAt(t, filepath.Join(dir, "xfce4-session-cb-prev:1"), "[Session: Default]\nClient0_Program=display1\n", time.Now())
	writeAt(t, filepath.Join(dir, "Thunar-2abc"), "thunar state", time.Now())

	a, err := Adopt(dir, "cb-new", "0")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Copied || filepath.Base(a.From) != "xfce4-session-cb-prev:0" || filepath.Base(a.To) != "xfce4-session-cb-new:0" {
		t.Fatalf("adoption %+v", a)
	}
	got, err := os.ReadFile(a.To)
	if err != nil || string(got) != string(realSave(t)) {
		t.Fatalf("adopted file differs from the newest save (%v)", err)
	}
	if fi, _ := os.Stat(a.To); !fi.ModTime().Equal(newer) || fi.Mode().Perm() != 0o600 {
		t.Errorf("adopted file mtime %v mode %v, want the source's %v and 0600", fi.ModTime(), fi.Mode(), newer)
	}
	if _, err := os.Stat(a.From); err != nil {
		t.Errorf("the other host's save went away: %v", err)
	}
	// Again: now the host's save is (as old as) the newest; nothing changes.
	a2, err := Adopt(dir, "cb-new", "0")
	if err != nil || a2.Copied {
		t.Errorf("second adoption copied again: %+v, %v", a2, err)
	}
}

func TestAdoptKeepsTheHostsOwnSaveWhenItIsNewest(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "xfce4-session-other:0"), "[Session: Default]\nClient0_Program=other\n", time.Now().Add(-time.Hour))
	own := filepath.Join(dir, "xfce4-session-me:0")
	writeAt(t, own, "[Session: Default]\nClient0_Program=mine\n", time.Now())
	a, err := Adopt(dir, "me", "0")
	if err != nil || a.Copied || a.From != own {
		t.Fatalf("adoption %+v, %v", a, err)
	}
	if data, _ := os.ReadFile(own); !strings.Contains(string(data), "mine") {
		t.Errorf("own save overwritten: %q", data)
	}
}

func TestAdoptDoesNotCopyAgainWhenTheHostsCopyTiesTheNewest(t *testing.T) {
	dir := t.TempDir()
	at := time.Now().Add(-time.Minute)
	// "a-old" sorts before "z-new": a tie must not be broken by the name.
	writeAt(t, filepath.Join(dir, "xfce4-session-a-old:0"), string(realSave(t)), at)
	a, err := Adopt(dir, "z-new", "0")
	if err != nil || !a.Copied {
		t.Fatalf("first adoption %+v, %v", a, err)
	}
	a2, err := Adopt(dir, "z-new", "0")
	if err != nil || a2.Copied || filepath.Base(a2.From) != "xfce4-session-z-new:0" {
		t.Errorf("second adoption %+v, %v: want the host's own copy, nothing copied", a2, err)
	}
}

func TestAdoptWithoutSavesSaysSo(t *testing.T) {
	if _, err := Adopt(t.TempDir(), "me", "0"); !errors.Is(err, ErrNoSave) {
		t.Errorf("err = %v, want ErrNoSave", err)
	}
}

func TestAdoptRefusesACorruptNewestSave(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "xfce4-session-other:0"), "garbage without a group\n", time.Now())
	if _, err := Adopt(dir, "me", "0"); err == nil || !strings.Contains(err.Error(), "xfce4-session-other:0") {
		t.Errorf("err = %v, want one naming the corrupt save", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "xfce4-session-me:0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a corrupt save was adopted")
	}
}

func TestAdoptRefusesAHostNameThatCannotNameAFile(t *testing.T) {
	for _, host := range []string{"", "a/b", "a:b"} {
		if _, err := Adopt(t.TempDir(), host, "0"); err == nil {
			t.Errorf("Adopt took host %q", host)
		}
	}
}

func TestLinkCacheLinksAndIsIdempotent(t *testing.T) {
	home := t.TempDir()
	for i := 0; i < 2; i++ {
		state, err := LinkCache(home)
		if err != nil {
			t.Fatal(err)
		}
		if state != filepath.Join(home, StateDir) {
			t.Fatalf("state dir %s", state)
		}
	}
	target, err := os.Readlink(filepath.Join(home, CacheLink))
	if err != nil || target != "../.local/state/xfce4-session" {
		t.Fatalf("link target %q, %v", target, err)
	}
	// A file written through the link lands in the state directory.
	if err := os.WriteFile(filepath.Join(home, CacheLink, "x"), []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, StateDir, "x")); err != nil {
		t.Error(err)
	}
}

func TestLinkCacheMovesARealDirectorysSaves(t *testing.T) {
	home := t.TempDir()
	cache := filepath.Join(home, CacheLink)
	state := filepath.Join(home, StateDir)
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	writeAt(t, filepath.Join(cache, "xfce4-session-a:0"), "from cache", time.Now())
	writeAt(t, filepath.Join(cache, "xfce4-session-b:0"), "old in cache", time.Now().Add(-time.Hour))
	writeAt(t, filepath.Join(state, "xfce4-session-b:0"), "newer in state", time.Now())
	if _, err := LinkCache(home); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(cache); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("cache is not a link: %v %v", fi, err)
	}
	for name, want := range map[string]string{"xfce4-session-a:0": "from cache", "xfce4-session-b:0": "newer in state"} {
		if got, _ := os.ReadFile(filepath.Join(state, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

func TestLinkCacheRefusesAFileInThePlace(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, CacheLink), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LinkCache(home); err == nil {
		t.Error("LinkCache replaced a regular file")
	}
}

func TestMousepadMarkerRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if open, err := MousepadWasOpen(dir); open || err != nil {
		t.Errorf("no marker: %v, %v", open, err)
	}
	for _, want := range []bool{true, false} {
		if err := RecordMousepad(dir, want); err != nil {
			t.Fatal(err)
		}
		if got, err := MousepadWasOpen(dir); got != want || err != nil {
			t.Errorf("MousepadWasOpen = %v, %v; want %v", got, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, MousepadMarker), []byte("maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MousepadWasOpen(dir); err == nil {
		t.Error("a marker of \"maybe\" was taken")
	}
}

func TestRunningFindsThisProcess(t *testing.T) {
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err) // Linux has /proc: nothing to skip
	}
	name := strings.TrimSpace(string(comm))
	if !Running("/proc", name, os.Getuid()) {
		t.Errorf("Running(%q, uid %d) = false for this very process", name, os.Getuid())
	}
	if Running("/proc", name, os.Getuid()+4242) {
		t.Errorf("Running matched another uid")
	}
	if Running("/proc", "no-such-process", os.Getuid()) {
		t.Errorf("Running found a process that does not exist")
	}
}

func FuzzParseSession(f *testing.F) {
	data, err := os.ReadFile("testdata/cbdesk1-display0.save")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("[Session: x]\nClient0_RestartCommand=a\\,b,c\\\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSession(data)
		if err != nil {
			return
		}
		if len(s.Clients) > len(data) {
			t.Fatalf("%d clients from %d bytes", len(s.Clients), len(data))
		}
	})
}
