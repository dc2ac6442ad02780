package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() { register(70, "the desk tier: Xorg :0, VNC, the XFCE session saved and restored", desk) }

const deskEnv = "HOME=/home/user DISPLAY=:0 XAUTHORITY=/run/cocoonbox-x/Xauthority " +
	"XDG_RUNTIME_DIR=/run/user/1000 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus"

// desk shows the desktop of a desk-tier box: the display and VNC, then a
// terminal, a Thunar window and Mousepad saved by session-save and
// restored after cbagent restarts the desktop, with a screenshot of the
// result. On a base image it says it has nothing to show.
func desk(ctx context.Context, d *demo, r *report) {
	b := d.box
	img, _ := b.ReadFile("/etc/cocoonbox/image")
	if !strings.Contains(string(img), "\ntier=desk\n") {
		r.info("desk", "skipped: not a desk image (make demo TIER=desk)")
		return
	}
	user := func(line string) (string, error) {
		res, err := b.Exec(box.Cmd{User: "user", Args: []string{"sh", "-c", "env " + deskEnv + " sh -c '" + line + "'"}})
		if err == nil && res.ExitCode != 0 {
			err = &exitErr{res}
		}
		return res.Stdout, err
	}
	wait := func(what string, timeout time.Duration, cond func() bool) bool {
		if err := box.Until(timeout, what, func() (bool, string) { return cond(), "not yet" }); err != nil {
			r.bad(what, "%v", err)
			return false
		}
		return true
	}
	idle := func() bool {
		out, _ := user("dbus-send --session --print-reply=literal --dest=org.xfce.SessionManager /org/xfce/SessionManager org.xfce.Session.Manager.GetState")
		x, _ := b.Run("pgrep", "-u", "user", "-x", "xfdesktop")
		return strings.TrimSpace(out) == "uint32 1" && strings.TrimSpace(x) != ""
	}
	if !wait("xfce4-session", 90*time.Second, idle) {
		return
	}
	info, err := user("xdpyinfo | grep -E \"name of display|dimensions\"")
	r.check("Xorg", err, "%s", strings.Join(strings.Fields(info), " "))
	r.check("VNC", vncBanner(b), "the box's 127.0.0.1:5900 answers RFB 003.008 with security type None only")
	ps, err := b.Run("ps", "-C", "xfce4-session", "-o", "user=,pid=")
	r.check("XFCE session", err, "xfce4-session runs as %s", strings.Join(strings.Fields(ps), " pid "))

	fm := "dbus-send --session --print-reply --dest=org.xfce.FileManager /org/xfce/FileManager org.xfce.FileManager."
	_, err = user("mkdir -p ~/work/demo && echo \"written by make demo\" >~/notes.txt && " +
		fm + "Execute string:/home/user/work/demo string:file:///usr/bin/xfce4-terminal array:string: string::0 string: && " +
		fm + "DisplayFolder string:file:///home/user/work string::0 string: && " +
		fm + "Launch string:file:///home/user/notes.txt string::0 string:")
	r.check("open clients", err, "xfce4-terminal in ~/work/demo, Thunar on ~/work, Mousepad with ~/notes.txt")
	titles := func() string {
		out, _ := user(`for w in $(xprop -root _NET_CLIENT_LIST | sed -e "s/.*# //" -e "s/,//g"); do xprop -id $w _NET_WM_NAME | cut -d\" -f2; done`)
		return strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " ")
	}
	all := func() bool {
		t := titles()
		return strings.Contains(t, "notes.txt - Mousepad") && strings.Contains(t, "work - Thunar") && strings.Contains(t, "Terminal")
	}
	if !wait("windows", 60*time.Second, all) {
		return
	}
	out, err := user("/usr/local/lib/cocoonbox/session-save")
	r.check("session-save", err, "%s", strings.TrimSpace(out))
	res, err := b.Exec(box.Cmd{User: "cbagent", Args: []string{"systemctl", "restart", "cocoonbox-session.service"}})
	if err == nil && res.ExitCode != 0 {
		err = &exitErr{res}
	}
	r.check("desktop restart", err, "cbagent: systemctl restart cocoonbox-session.service")
	if !wait("restored session", 90*time.Second, func() bool { return idle() && all() }) {
		return
	}
	r.ok("restored", "%s", titles())
	// The panel comes back a moment after the session is idle; GetImage of
	// the root can fail with BadMatch while xfwm4 remaps a window: a few tries.
	wait("panel", 20*time.Second, func() bool {
		out, _ := user("xwininfo -name xfce4-panel")
		return strings.Contains(out, "IsViewable")
	})
	var png string
	for try := 0; try < 5; try++ {
		if png, err = user("f=$(mktemp) && xwd -root -silent >$f && convert xwd:$f png:-; rc=$?; rm -f $f; exit $rc"); err == nil && strings.HasPrefix(png, "\x89PNG") {
			break
		}
		time.Sleep(time.Second)
	}
	if err == nil {
		path := filepath.Join("out", "artifacts", "demo-desk.png")
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.WriteFile(path, []byte(png), 0o644)
		}
		r.check("screenshot", err, "%s (%d bytes): look at the restored desktop", path, len(png))
		return
	}
	r.bad("screenshot", "%v", err)
}

type exitErr struct{ res box.Result }

func (e *exitErr) Error() string {
	return fmt.Sprintf("exit %d: %s", e.res.ExitCode, strings.TrimSpace(e.res.Stderr))
}

// vncBanner dials the box's VNC server on the box's own loopback (each
// box has its own network namespace; the port is reached from outside only
// through the supervisor's relay), from a shell in the box that rsh
// started, and checks the RFB banner and the security types.
func vncBanner(b *box.Box) error {
	res, err := b.Exec(box.Cmd{User: "user", Args: []string{"bash", "-c",
		`exec 3<>/dev/tcp/127.0.0.1/5900 && head -c 12 <&3 && printf 'RFB 003.008\n' >&3 && head -c 2 <&3 | od -An -tu1`}})
	if err != nil {
		return err
	}
	banner, types, _ := strings.Cut(res.Stdout, "\n")
	if res.ExitCode != 0 || banner != "RFB 003.008" {
		return fmt.Errorf("unexpected RFB answer %q (exit %d: %s)", res.Stdout, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if f := strings.Fields(types); len(f) != 2 || f[0] != "1" || f[1] != "1" {
		return fmt.Errorf("security types %q, want 1 type: None (1)", strings.TrimSpace(types))
	}
	return nil
}
