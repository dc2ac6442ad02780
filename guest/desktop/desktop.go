// Package desktop keeps the XFCE desktop session of the box's desktop user
// across desktop restarts, state restores and box renames.
//
// Contract: Desktop session save. xfce4-session keeps its saves in
// ~/.local/state/xfce4-session; ~/.cache/sessions (where xfce4-session looks,
// $XDG_CACHE_HOME/sessions) is a symbolic link there, so the state layer,
// which carries ~/.local/state, carries the saves. xfce4-session names a
// save after the host and the display ("xfce4-session-<host>:<display>",
// see SessionFileName), and the box's host name changes with its name
// (Contract: Box identity), so at each session start Adopt copies the newest
// save to the current host's name. Mousepad is no XSMP client: session-save
// records whether it was open (RecordMousepad) and an autostart entry
// reopens it (MousepadWasOpen); its own session-restore='always' reopens
// its documents.
package desktop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/renameio/v2"

	"github.com/cocoonbox/cocoonbox/internal/durable"
)

// SessionFilePrefix starts the name of every xfce4-session save.
const SessionFilePrefix = "xfce4-session-"

// MousepadMarker is the file, in the state directory, that records whether
// Mousepad was open at the last successful save: "open\n" or "closed\n".
const MousepadMarker = "cocoonbox-mousepad"

// StateDir is where the saves live below a home directory.
const StateDir = ".local/state/xfce4-session"

// CacheLink is the path below a home directory that xfce4-session reads and
// writes ($XDG_CACHE_HOME/sessions); it links to StateDir.
const CacheLink = ".cache/sessions"

// ErrNoSave reports a state directory without any save for the display.
var ErrNoSave = errors.New("no saved xfce4-session session")

// DisplayNumber returns the display number of an X display name
// (":0", ":0.0", "unix:0", "host:12.1" → "0", "0", "0", "12"), the part
// xfce4-session puts after the host in a save's name.
func DisplayNumber(display string) (string, error) {
	i := strings.LastIndexByte(display, ':')
	if i < 0 {
		return "", fmt.Errorf("display %q is not an X display name: it must contain ':' and a number (\":0\")", display)
	}
	num, _, _ := strings.Cut(display[i+1:], ".")
	if num == "" || strings.Trim(num, "0123456789") != "" {
		return "", fmt.Errorf("display %q is not an X display name: a number must follow ':' (\":0\")", display)
	}
	return num, nil
}

// SessionFileName is the name xfce4-session gives the save of a host and
// display number: "xfce4-session-" + host + ":" + display.
func SessionFileName(host, display string) string {
	return SessionFilePrefix + host + ":" + display
}

// Save is one xfce4-session save file in the state directory.
type Save struct {
	Path    string
	Host    string
	ModTime time.Time
}

// Saves lists the saves for a display number in dir, newest first. Names
// that are not saves (temporary files, other displays, the marker) are
// left out, and so is anything but a regular file.
func Saves(dir, display string) ([]Save, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	suffix := ":" + display
	var saves []Save
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, SessionFilePrefix) || !strings.HasSuffix(name, suffix) {
			continue
		}
		host := strings.TrimSuffix(strings.TrimPrefix(name, SessionFilePrefix), suffix)
		if host == "" || strings.ContainsAny(host, ":/") {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		saves = append(saves, Save{Path: filepath.Join(dir, name), Host: host, ModTime: info.ModTime()})
	}
	sort.SliceStable(saves, func(i, j int) bool {
		if !saves[i].ModTime.Equal(saves[j].ModTime) {
			return saves[i].ModTime.After(saves[j].ModTime)
		}
		return saves[i].Host < saves[j].Host
	})
	return saves, nil
}

// Adoption says what Adopt did.
type Adoption struct {
	// From is the newest save found; To the current host's save.
	From, To string
	// Copied is true when From was another host's and was copied to To.
	Copied bool
}

// Adopt makes the newest save of the display in dir the current host's, so
// xfce4-session, which looks only under its own host name, restarts it.
// When the newest save already is the host's, nothing changes. The copy is
// checked to be a session file first (ParseSession) and written atomically
// (temp file, fsync, rename), keeping the source's modification time, so a
// crash leaves the old or the new file; the other host's save stays. It
// returns ErrNoSave when the directory holds no save for the display.
func Adopt(dir, host, display string) (Adoption, error) {
	if host == "" || strings.ContainsAny(host, ":/") {
		return Adoption{}, fmt.Errorf("host name %q cannot name a session file: it must be non-empty without ':' or '/'", host)
	}
	saves, err := Saves(dir, display)
	if err != nil {
		return Adoption{}, err
	}
	if len(saves) == 0 {
		return Adoption{}, fmt.Errorf("%w for display :%s in %s", ErrNoSave, display, dir)
	}
	newest := saves[0]
	// An earlier adoption gave the host's copy its source's time: on a tie
	// the host's own save counts as the newest, so nothing is copied again.
	for _, s := range saves[1:] {
		if !s.ModTime.Equal(newest.ModTime) {
			break
		}
		if s.Host == host {
			newest = s
		}
	}
	to := filepath.Join(dir, SessionFileName(host, display))
	a := Adoption{From: newest.Path, To: to}
	if newest.Host == host {
		return a, nil
	}
	data, err := os.ReadFile(newest.Path)
	if err != nil {
		return a, err
	}
	if _, err := ParseSession(data); err != nil {
		return a, fmt.Errorf("newest save %s: %w", newest.Path, err)
	}
	if err := durable.WriteFile(to, data, 0o600); err != nil {
		return a, fmt.Errorf("adopt %s as %s: %w", newest.Path, to, err)
	}
	// Keep the save's age, so a later Adopt still sees which is newest.
	_ = os.Chtimes(to, newest.ModTime, newest.ModTime)
	a.Copied = true
	return a, nil
}

// LinkCache makes home/.cache/sessions a symbolic link to the state
// directory home/.local/state/xfce4-session, creating both as needed. A real
// directory in its place (a home from before the link, or an app that
// replaced it) has its files moved into the state directory first, a file
// already there and newer winning; then the directory goes. It is
// idempotent, and returns the state directory.
func LinkCache(home string) (string, error) {
	state := filepath.Join(home, StateDir)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return "", err
	}
	link := filepath.Join(home, CacheLink)
	target := filepath.Join("..", StateDir) // relative: the home can move
	fi, err := os.Lstat(link)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		if cur, _ := os.Readlink(link); cur == target {
			return state, nil
		}
		if err := os.Remove(link); err != nil {
			return "", err
		}
	case err == nil && fi.IsDir():
		if err := moveInto(link, state); err != nil {
			return "", err
		}
		if err := os.Remove(link); err != nil {
			return "", fmt.Errorf("%s still holds files after moving its saves to %s: %w", link, state, err)
		}
	case err == nil:
		return "", fmt.Errorf("%s is neither a directory nor a link: move it away so the session saves can link there", link)
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return "", err
	}
	if err := renameio.Symlink(target, link); err != nil {
		return "", err
	}
	return state, nil
}

// moveInto moves the regular files of src into dst; a file in dst that is
// at least as new stays and the older one in src is dropped.
func moveInto(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if cur, err := os.Lstat(to); err == nil && !cur.ModTime().Before(fi.ModTime()) {
			if err := os.Remove(from); err != nil {
				return err
			}
			continue
		}
		if err := os.Rename(from, to); err != nil {
			return err
		}
	}
	return nil
}

// RecordMousepad writes the Mousepad marker in the state directory
// atomically.
func RecordMousepad(stateDir string, open bool) error {
	v := "closed\n"
	if open {
		v = "open\n"
	}
	return durable.WriteFile(filepath.Join(stateDir, MousepadMarker), []byte(v), 0o600)
}

// MousepadWasOpen reads the marker: true only for "open". A missing marker
// (no save yet) is false, not an error.
func MousepadWasOpen(stateDir string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, MousepadMarker))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch strings.TrimSpace(string(data)) {
	case "open":
		return true, nil
	case "closed":
		return false, nil
	}
	return false, fmt.Errorf("%s holds %q: the marker is \"open\" or \"closed\"", filepath.Join(stateDir, MousepadMarker), strings.TrimSpace(string(data)))
}
