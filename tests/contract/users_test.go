//go:build booted

package contract

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// Contract: Desktop user. user, uid 1000, passwordless sudo through
// /etc/sudoers.d/90-cocoonbox-user, which visudo accepts.
func TestDesktopUserHasUID1000AndPasswordlessSudo(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	pw := strings.Split(strings.TrimSpace(b.Must(t, "getent", "passwd", "user")), ":")
	if len(pw) != 7 || pw[2] != "1000" || pw[5] != "/home/user" || pw[6] != "/bin/bash" {
		t.Errorf("getent passwd user = %q, want uid 1000, home /home/user, shell /bin/bash", strings.Join(pw, ":"))
	}
	wantStat(t, b, "/etc/sudoers.d/90-cocoonbox-user", "440 root:root regular file")
	b.Must(t, "visudo", "-c", "-q")
	// -n: never ask for a password; a rule that wanted one fails here.
	out, err := b.RunAs("user", "sudo", "-n", "id", "-u")
	if err != nil {
		t.Fatalf("sudo -n as user: %v", err)
	}
	if strings.TrimSpace(out) != "0" {
		t.Errorf("sudo -n id -u as user printed %q, want 0", out)
	}
	// The right comes from our sudoers file, not from the sudo group.
	for _, g := range strings.Fields(b.Must(t, "id", "-Gn", "user")) {
		if g == "sudo" || g == "root" {
			t.Errorf("user is in group %s; its sudo right must come from 90-cocoonbox-user alone", g)
		}
	}
}

// Contract: Desktop user, "which keeps the proxy variables": the box
// reaches the network through a proxy, so sudo apt-get must see it.
func TestDesktopUserSudoKeepsTheProxyVariables(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	for _, v := range []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} {
		want := "http://10.203.0.1:3128/" + v
		out, err := b.RunAs("user", "env", v+"="+want, "sudo", "-n", "printenv", v)
		if err != nil {
			t.Errorf("sudo -n printenv %s as user: %v", v, err)
			continue
		}
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("under sudo %s = %q, want %q (kept from user's environment)", v, got, want)
		}
	}
	// Control: sudo's env_reset still drops what the file does not keep,
	// so the check above is about env_keep and not a sudo that keeps all.
	out, _ := b.RunAs("user", "env", "COCOONBOX_NOT_KEPT=1", "sudo", "-n", "sh", "-c", "echo ${COCOONBOX_NOT_KEPT:-dropped}")
	if strings.TrimSpace(out) != "dropped" {
		t.Errorf("sudo kept COCOONBOX_NOT_KEPT (%q): env_reset is off, the proxy check proves nothing", out)
	}
}

// Contract: Agent user. cbagent is a system user, has no login shell and
// shares no group with user.
func TestAgentUserIsSystemUserWithoutLoginShell(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	pw := strings.Split(strings.TrimSpace(b.Must(t, "getent", "passwd", "cbagent")), ":")
	if len(pw) != 7 {
		t.Fatalf("getent passwd cbagent = %q", pw)
	}
	sysMax := atoi(t, b.MustSh(t, "awk '$1 == \"SYS_UID_MAX\" { v = $2 } END { print v ? v : 999 }' /etc/login.defs"))
	if uid := atoi(t, pw[2]); uid >= 1000 || uid > sysMax || uid == 0 {
		t.Errorf("cbagent uid %d is not a system uid (1..%d)", uid, sysMax)
	}
	if pw[6] != "/usr/sbin/nologin" {
		t.Errorf("cbagent's shell is %q, want /usr/sbin/nologin", pw[6])
	}
	// No password either: the account cannot log in by any door.
	if st := strings.Fields(b.Must(t, "passwd", "-S", "cbagent")); len(st) < 2 || st[1] != "L" {
		t.Errorf("passwd -S cbagent = %v, want a locked password (L)", st)
	}
	// A login as cbagent is refused by its shell.
	res, err := b.Exec(box.Cmd{Args: []string{"runuser", "-l", "cbagent", "-c", "echo logged-in"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "logged-in") {
		t.Errorf("runuser -l cbagent ran a command (exit %d, %q); nologin should refuse", res.ExitCode, res.Stdout)
	}
	userGroups := map[int]bool{}
	for _, g := range groupIDs(t, b, "user") {
		userGroups[g] = true
	}
	for _, g := range groupIDs(t, b, "cbagent") {
		if userGroups[g] {
			t.Errorf("cbagent shares group %d with user", g)
		}
	}
}
