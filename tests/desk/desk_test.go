//go:build booted

// Package desk holds the booted-box tests of the desk tier (issue 7): Xorg
// on :0 with VNC, the XFCE session of user, and desktop session save and
// restore. Contract: Desktop user, VNC, Desktop session save, Office apps,
// Browser, Desktop restart, Box identity (the X cookie).
//
// They boot the desk image: $COCOONBOX_DESK_IMAGE (which must be one; `make
// test` and `make desk-test` set it), else $COCOONBOX_IMAGE when that is a
// desk image, else out/images/cbdesk-vN-desk. Without a named or built desk
// image they skip, saying how to build it.
//
// A box shares the host's network, so its VNC port is the host's
// 127.0.0.1:5900: the tests of this package boot one desk box at a time
// (no t.Parallel) and dial that port directly.
package desk

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/testenv"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// DeskImageEnv names the variable that points these tests at a desk image.
const DeskImageEnv = "COCOONBOX_DESK_IMAGE"

// The session environment of the desktop user (Contract: Tool host).
const sessionEnv = "HOME=/home/user DISPLAY=:0 XAUTHORITY=/run/cocoonbox-x/Xauthority " +
	"XDG_RUNTIME_DIR=/run/user/1000 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus"

// deskImage finds the desk image or skips the test.
func deskImage(t testing.TB) string {
	t.Helper()
	if err := box.CanBoot(); err != nil {
		testenv.SkipOrFail(t, "booted-box test cannot run: "+err.Error())
	}
	if img := os.Getenv(DeskImageEnv); img != "" {
		// Named on purpose (make box-test, make desk-test): no skipping.
		if !isDesk(img) {
			t.Fatalf("%s=%s is not a desk image (its etc/cocoonbox/image lacks tier=desk)", DeskImageEnv, img)
		}
		return img
	}
	if img := os.Getenv(box.ImageEnv); img != "" && isDesk(img) {
		return img
	}
	root, v, err := box.ImageVersion()
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(root, "out/images", fmt.Sprintf("cbdesk-v%s-desk", v))
	if !isDesk(img) {
		testenv.SkipOrFail(t, fmt.Sprintf("desk tests cannot run: no desk image at %s (build it with `make image TIER=desk`, or run `make desk-test`; or set %s)", img, DeskImageEnv))
	}
	return img
}

func isDesk(img string) bool {
	data, err := os.ReadFile(filepath.Join(img, "etc/cocoonbox/image"))
	return err == nil && strings.Contains(string(data), "\ntier=desk\n")
}

// bootDesk boots a desk box and waits for its desktop to be idle.
func bootDesk(t testing.TB) *box.Box {
	t.Helper()
	img := deskImage(t)
	vncPortFree(t)
	b := box.Boot(t, box.Options{Image: img})
	waitDesktop(t, b)
	return b
}

// vncPortFree waits (30 s at most) until nothing answers on the host's
// 127.0.0.1:5900, and fails the test naming the cause otherwise: a box
// shares the host's network, so a desk box started elsewhere (make box
// TIER=desk, make demo TIER=desk) would make this box's Xorg fail to start.
func vncPortFree(t testing.TB) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:5900", time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(end) {
			t.Fatal("127.0.0.1:5900 is taken on this host (another desk box, or a VNC server): a desk box's Xorg could not listen there; stop it and run the desk tests again")
		}
	}
}

// asUser runs a shell line as user in the desktop's environment.
func asUser(b *box.Box, line string) (box.Result, error) {
	return b.Exec(box.Cmd{Args: []string{"sh", "-c", "env " + sessionEnv + " sh -c '" + strings.ReplaceAll(line, "'", `'\''`) + "'"}, User: "user"})
}

// mustUser is asUser that fails the test on a non-zero exit.
func mustUser(t testing.TB, b *box.Box, line string) string {
	t.Helper()
	res, err := asUser(b, line)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("as user: %q exited %d: %s", line, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return res.Stdout
}

// sessionState asks xfce4-session for its state over D-Bus (1 is idle).
func sessionState(b *box.Box) string {
	res, _ := asUser(b, "dbus-send --session --print-reply=literal --dest=org.xfce.SessionManager /org/xfce/SessionManager org.xfce.Session.Manager.GetState")
	return strings.TrimSpace(res.Stdout)
}

// waitDesktop waits until xfce4-session runs as user and is idle, with its
// desktop (xfdesktop) up.
func waitDesktop(t testing.TB, b *box.Box) {
	t.Helper()
	box.Eventually(t, 90*time.Second, "xfce4-session idle with xfdesktop", func() (bool, string) {
		state := sessionState(b)
		out, _ := b.Run("pgrep", "-u", "user", "-x", "xfdesktop")
		return state == "uint32 1" && strings.TrimSpace(out) != "", "GetState=" + state + " xfdesktop=" + strings.TrimSpace(out)
	})
}

// thunar calls Thunar's org.xfce.FileManager interface: programs it starts
// are children of the session's Thunar, so they run in the desktop's
// logind session with its SESSION_MANAGER, as if the user clicked.
func thunar(t testing.TB, b *box.Box, method string, args ...string) {
	t.Helper()
	mustUser(t, b, "dbus-send --session --print-reply --dest=org.xfce.FileManager /org/xfce/FileManager org.xfce.FileManager."+
		method+" "+strings.Join(args, " "))
}

// windowTitles lists the titles of the desktop's managed windows.
func windowTitles(b *box.Box) []string {
	res, _ := asUser(b, `for w in $(xprop -root _NET_CLIENT_LIST | sed -e 's/.*# //' -e 's/,//g'); do xprop -id "$w" _NET_WM_NAME | sed -e 's/^[^"]*"//' -e 's/"$//'; done`)
	var titles []string
	for _, l := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		if l != "" {
			titles = append(titles, l)
		}
	}
	return titles
}

func hasTitle(titles []string, part string) bool {
	for _, s := range titles {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

// terminalDirs lists the working directories of the shells that
// xfce4-terminal runs.
func terminalDirs(b *box.Box) []string {
	out, _ := b.Sh(`for p in $(pgrep -u user -x bash); do pp=$(ps -o ppid= -p "$p" | tr -d ' '); [ "$(cat /proc/$pp/comm 2>/dev/null)" = xfce4-terminal ] && readlink "/proc/$p/cwd"; done; true`)
	return strings.Fields(out)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pids lists the PIDs of user's processes named comm.
func pids(b *box.Box, comm string) string {
	out, _ := b.Run("pgrep", "-u", "user", "-x", comm)
	return strings.Join(strings.Fields(out), ",")
}

// writeIdentity writes an identity record with the given name, as the api
// does through sandboxd, and waits for the hostname to follow.
func writeIdentity(t testing.TB, b *box.Box, name, wantHost string) {
	t.Helper()
	wake := make([]byte, 4)
	_, _ = rand.Read(wake)
	if err := b.WriteIdentity(box.NewIdentity("cb-desk"+hex.EncodeToString(wake), name)); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitHostname(wantHost, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}
