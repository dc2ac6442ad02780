//go:build booted

package desk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Desktop user. Xorg runs on :0 as cocoonbox-xorg.service, at
// 1280x800, and user's clients reach it with the cookie in
// /run/cocoonbox-x/Xauthority.
func TestXorgRunsOnDisplay0(t *testing.T) {
	b := bootDesk(t)
	if out := b.Must(t, "systemctl", "is-active", "cocoonbox-xorg.service"); strings.TrimSpace(out) != "active" {
		t.Fatalf("cocoonbox-xorg.service is %q", out)
	}
	info := mustUser(t, b, "xdpyinfo")
	for _, want := range []string{"name of display:    :0", "dimensions:    1280x800 pixels"} {
		if !strings.Contains(info, want) {
			t.Errorf("xdpyinfo lacks %q:\n%.600s", want, info)
		}
	}
	if !strings.Contains(info, "VNC-EXTENSION") {
		t.Errorf("the VNC extension is not loaded in :0 (xdpyinfo extensions)")
	}
	// Without the cookie, no client gets in.
	if res, _ := b.Exec(box.Cmd{Args: []string{"env", "DISPLAY=:0", "XAUTHORITY=/nonexistent", "xdpyinfo"}, User: "user"}); res.ExitCode == 0 {
		t.Errorf("xdpyinfo without the cookie reached :0")
	}
}

// Contract: Box identity ("the X cookie holds for any hostname"). The one
// entry is FamilyWild (ffff), root:user 0640, and still lets user in after
// the host name changed under the running server.
func TestXCookieHoldsForAnyHostname(t *testing.T) {
	b := bootDesk(t)
	if out := b.MustSh(t, "stat -c '%U:%G %a' /run/cocoonbox-x/Xauthority"); strings.TrimSpace(out) != "root:user 640" {
		t.Errorf("Xauthority is %q, want root:user 640", strings.TrimSpace(out))
	}
	nlist := strings.TrimSpace(b.Must(t, "xauth", "-f", "/run/cocoonbox-x/Xauthority", "nlist"))
	lines := strings.Split(nlist, "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "ffff ") {
		t.Fatalf("Xauthority entries %q: want one FamilyWild (ffff) entry", nlist)
	}
	b.Must(t, "hostname", "cookie-renamed-box")
	if res, _ := asUser(b, "xdpyinfo >/dev/null"); res.ExitCode != 0 {
		t.Errorf("after a rename, user's client is refused by :0: %s", res.Stderr)
	}
}

// Contract: VNC. 127.0.0.1:5900 answers with an RFB 3.8 banner and offers
// exactly the security type None (1).
func TestVNCAnswersWithRFBAndSecurityNone(t *testing.T) {
	bootDesk(t)
	if err := vncHandshake(); err != nil {
		t.Fatal(err)
	}
}

// Issue 43 (the box's VNC blacklist, docs/screen.md): TigerVNC marks a
// client address at every connection and clears it only at a finished
// handshake; past BlacklistThreshold marks (its default is 5) it answers
// every connection from that address "Too many security failures".
// Every viewer reaches the box through the port relay from the box's own
// 127.0.0.1, so probes or viewers that close early must not lock out the
// next one: the image raises the threshold.
func TestVNCServesAViewerAfterSixEarlyCloses(t *testing.T) {
	bootDesk(t)
	for i := range 6 {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:5900", 5*time.Second)
		if err != nil {
			t.Fatalf("early close %d: %v", i+1, err)
		}
		conn.Close()
	}
	if err := vncHandshake(); err != nil {
		t.Fatalf("after six connections closed before their handshake, the next viewer: %v", err)
	}
}

// vncHandshake connects to 127.0.0.1:5900 and goes through the RFB 3.8
// handshake, choosing security type None, the only one offered.
func vncHandshake() error {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:5900", 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	banner := make([]byte, 12)
	if _, err := io.ReadFull(conn, banner); err != nil {
		return fmt.Errorf("reading the banner: %w", err)
	}
	if string(banner) != "RFB 003.008\n" {
		rest, _ := io.ReadAll(io.LimitReader(conn, 200))
		return fmt.Errorf("banner %q (then %q), want RFB 003.008", banner, rest)
	}
	if _, err := conn.Write(banner); err != nil {
		return err
	}
	n := make([]byte, 1)
	if _, err := io.ReadFull(conn, n); err != nil {
		return fmt.Errorf("reading the security types: %w", err)
	}
	if n[0] == 0 { // a refusal: its reason follows (RFC 6143 7.1.2)
		rest, _ := io.ReadAll(io.LimitReader(conn, 200))
		return fmt.Errorf("the server refused the connection: %q", rest)
	}
	types := make([]byte, n[0])
	if _, err := io.ReadFull(conn, types); err != nil {
		return err
	}
	if !bytes.Equal(types, []byte{1}) {
		return fmt.Errorf("security types %v, want [1] (None only)", types)
	}
	// Choosing None gets SecurityResult OK (0) with no password.
	if _, err := conn.Write([]byte{1}); err != nil {
		return err
	}
	result := make([]byte, 4)
	if _, err := io.ReadFull(conn, result); err != nil || !bytes.Equal(result, []byte{0, 0, 0, 0}) {
		return fmt.Errorf("SecurityResult %v, %v; want OK", result, err)
	}
	return nil
}

// Contract: VNC ("loopback only"). Nothing listens on port 5900 beyond
// 127.0.0.1, and the host's own non-loopback addresses refuse it.
func TestVNCListensOnLoopbackOnly(t *testing.T) {
	b := bootDesk(t)
	out := b.Must(t, "ss", "-Hltn", "sport = :5900")
	if strings.TrimSpace(out) == "" {
		t.Fatal("nothing listens on port 5900")
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) < 4 || f[3] != "127.0.0.1:5900" {
			t.Errorf("listener beyond loopback: %q", line)
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ip, _, _ := net.ParseCIDR(a.String())
		if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), "5900"), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("port 5900 answers on %s", ip)
		}
	}
}

// Contract: Desktop user, Desktop restart. xfce4-session runs as user, in
// a logind session (so KillUserProcesses applies) of cocoonbox-session.service.
func TestXfceSessionRunsAsUser(t *testing.T) {
	b := bootDesk(t)
	if out := b.Must(t, "ps", "-C", "xfce4-session", "-o", "user="); strings.TrimSpace(out) != "user" {
		t.Errorf("xfce4-session runs as %q, want user", strings.TrimSpace(out))
	}
	pid := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "cocoonbox-session.service"))
	if comm := strings.TrimSpace(b.Must(t, "cat", "/proc/"+pid+"/comm")); comm != "xfce4-session" {
		t.Errorf("cocoonbox-session.service's main process is %q", comm)
	}
	cg := b.Must(t, "cat", "/proc/"+pid+"/cgroup")
	if !strings.Contains(cg, "/user.slice/user-1000.slice/session-") {
		t.Errorf("xfce4-session is in no logind session scope: %s", cg)
	}
	if out := b.MustSh(t, "loginctl show-session $(loginctl list-sessions --no-legend | awk '$3 == \"user\" {print $1}' | head -1) -P Type"); strings.TrimSpace(out) != "x11" {
		t.Errorf("the desktop's logind session has type %q, want x11", strings.TrimSpace(out))
	}
	if !strings.Contains(b.Must(t, "systemctl", "show", "-P", "Wants", "cocoonbox-session.service"), "cocoonbox-packages.service") {
		t.Errorf("cocoonbox-session.service does not want cocoonbox-packages.service")
	}
}

// Contract: Office apps, Browser. Text stays with Mousepad, office files
// open in LibreOffice, LibreOffice's launcher drops SESSION_MANAGER, and
// the browser policies are where Chrome and chromium read them.
func TestOfficeAppsMimeDefaultsAndBrowserPolicies(t *testing.T) {
	b := bootDesk(t)
	for mime, want := range map[string]string{
		"text/plain": "org.xfce.mousepad.desktop",
		"application/vnd.oasis.opendocument.text":                                 "libreoffice-writer.desktop",
		"application/vnd.oasis.opendocument.spreadsheet":                          "libreoffice-calc.desktop",
		"application/vnd.oasis.opendocument.presentation":                         "libreoffice-impress.desktop",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "libreoffice-writer.desktop",
	} {
		if got := strings.TrimSpace(mustUser(t, b, "xdg-mime query default "+mime)); got != want {
			t.Errorf("default for %s is %q, want %q", mime, got, want)
		}
	}
	for _, pkg := range []string{"libreoffice-calc", "libreoffice-writer", "libreoffice-impress", "libreoffice-gtk3", "mousepad", "chromium"} {
		if _, err := b.Run("dpkg-query", "-W", pkg); err != nil {
			t.Errorf("package %s is not installed: %v", pkg, err)
		}
	}
	if out := mustUser(t, b, "SESSION_MANAGER=local/x:@/tmp/.ICE-unix/1 sh -c '. /usr/lib/libreoffice/program/ooenv; echo \"${SESSION_MANAGER-dropped}\"'"); strings.TrimSpace(out) != "dropped" {
		t.Errorf("ooenv keeps SESSION_MANAGER: %q", out)
	}
	for _, dir := range []string{"/etc/opt/chrome/policies", "/etc/chromium/policies"} {
		var managed map[string]any
		data, err := b.ReadFile(dir + "/managed/cocoonbox.json")
		if err != nil || json.Unmarshal(data, &managed) != nil {
			t.Errorf("%s/managed/cocoonbox.json: %v %s", dir, err, data)
			continue
		}
		for _, k := range []string{"PasswordManagerEnabled", "MetricsReportingEnabled", "PromotionsEnabled"} {
			if managed[k] != false {
				t.Errorf("%s managed %s = %v, want false", dir, k, managed[k])
			}
		}
		var rec map[string]any
		data, err = b.ReadFile(dir + "/recommended/cocoonbox.json")
		if err != nil || json.Unmarshal(data, &rec) != nil || rec["RestoreOnStartup"] != float64(1) {
			t.Errorf("%s/recommended/cocoonbox.json: RestoreOnStartup=%v (%v)", dir, rec["RestoreOnStartup"], err)
		}
	}
	if out := strings.TrimSpace(mustUser(t, b, "dconf read /org/xfce/mousepad/preferences/file/session-restore")); out != "'always'" {
		t.Errorf("Mousepad's session-restore is %s, want 'always'", out)
	}
}

// Contract: Desktop restart. Each start of the desktop, the boot's and
// every restart by cbagent, is one logind session that stays: none ends
// at once and is brought back by Restart= ("Scheduled restart job"). That
// happened to about one start in five while desktop-session could exec
// xfce4-session from a thread other than the main one, which sent (sd-pam)
// its parent-death SIGTERM and closed the session.
func TestDesktopStartsOnceAtBootAndAtEachRestart(t *testing.T) {
	b := bootDesk(t)
	for i := 0; i < 5; i++ {
		b.Must(t, "runuser", "-u", "cbagent", "--", "systemctl", "restart", "cocoonbox-session.service")
		waitDesktop(t, b)
	}
	out := b.Must(t, "journalctl", "-u", "cocoonbox-session.service", "--no-pager", "-o", "cat")
	if n := strings.Count(out, "Scheduled restart job"); n > 0 {
		t.Errorf("the desktop ended on its own and was restarted %d times in 6 starts:\n%s", n, out)
	}
}

// The desk tier's units pass systemd-analyze verify, and systemd-analyze
// security of each is reported. Xorg runs as root and is held to the
// limit the image contract sets for its own units; the session is the
// user's whole desktop (sudo and apt included, so no sandbox it could
// pass on to them): it is held to the score it has.
func TestDeskUnitsVerifyAndReportSecurity(t *testing.T) {
	b := bootDesk(t)
	for _, path := range []string{"/usr/lib/systemd/system/cocoonbox-xorg.service", "/usr/lib/systemd/system/cocoonbox-session.service"} {
		res, err := b.Exec(box.Cmd{Args: []string{"systemd-analyze", "verify", path}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || strings.TrimSpace(res.Stderr) != "" {
			t.Errorf("systemd-analyze verify %s: exit %d\n%s%s", path, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	if got := b.Must(t, "systemctl", "show", "-P", "ExecStart", "cocoonbox-session.service"); !strings.Contains(got, "/usr/local/lib/cocoonbox/desktop-session start") {
		t.Errorf("cocoonbox-session.service runs %s, not the desk tier's desktop-session (the base stand-in was not replaced)", got)
	}
	// The session is held to its measured 9.2 (10 is the scale's maximum,
	// which no score exceeds: issue 18, item 9), so losing any of what
	// little hardening it has shows.
	for unit, limit := range map[string]float64{"cocoonbox-xorg.service": 4.0, "cocoonbox-session.service": 9.2} {
		score, level, _, err := b.Security(unit)
		if err != nil {
			t.Error(err)
			continue
		}
		t.Logf("systemd-analyze security %-26s %4.1f %s", unit, score, level)
		if score > limit {
			t.Errorf("%s: exposure %.1f, above %.1f", unit, score, limit)
		}
	}
}
