package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() {
	register(50, "the image contract (users, sudo, polkit, directories, policies)", contract)
}

// contract shows that the static lines of Guest (image) ↔ agent hold in
// the booted box: the two users, user's sudo, cbagent's polkit right on
// the desktop session and what it is refused, the directories and files
// with their owners and modes, and the browser policies.
func contract(ctx context.Context, d *demo, r *report) {
	b := d.box
	pw, err := b.Run("getent", "passwd", "user", "cbagent")
	r.check("users", err, "%s", strings.ReplaceAll(strings.TrimSpace(pw), "\n", " | "))

	out, err := b.Exec(box.Cmd{User: "user", Args: []string{"env", "http_proxy=http://proxy.example:3128",
		"sudo", "-n", "sh", "-c", `echo "uid $(id -u), http_proxy=$http_proxy"`}})
	switch {
	case err != nil:
		r.bad("sudo as user", "%v", err)
	case out.ExitCode != 0 || !strings.Contains(out.Stdout, "http_proxy=http://proxy.example:3128"):
		r.bad("sudo as user", "exit %d: %s%s", out.ExitCode, out.Stdout, out.Stderr)
	default:
		r.ok("sudo as user", "sudo -n: %s", strings.TrimSpace(out.Stdout))
	}

	// cbagent: allowed exactly start, stop, restart of the session.
	const session = "cocoonbox-session.service"
	for _, verb := range []string{"stop", "start", "restart"} {
		res, err := b.Exec(box.Cmd{User: "cbagent", Args: []string{"systemctl", verb, session}})
		if err != nil || res.ExitCode != 0 {
			r.bad("polkit cbagent allow", "systemctl %s %s: %v %s", verb, session, err, strings.TrimSpace(res.Stderr))
			continue
		}
		state, _ := b.Run("systemctl", "show", "-P", "ActiveState", session)
		r.ok("polkit cbagent allow", "systemctl %-7s %s → %s", verb, session, strings.TrimSpace(state))
	}
	for _, args := range [][]string{
		{"cbagent", "reload", session}, {"cbagent", "kill", session}, {"cbagent", "enable", session},
		{"cbagent", "mask", session}, {"cbagent", "set-property", session, "CPUWeight=10"},
		{"cbagent", "restart", "systemd-journald.service"}, {"user", "restart", session},
	} {
		res, err := b.Exec(box.Cmd{User: args[0], Args: append([]string{"systemctl"}, args[1:]...)})
		what := fmt.Sprintf("as %s: systemctl %s", args[0], strings.Join(args[1:], " "))
		msg := strings.TrimSpace(res.Stderr)
		if i := strings.Index(msg, "\n"); i >= 0 {
			msg = msg[:i]
		}
		if err != nil || res.ExitCode == 0 ||
			!(strings.Contains(msg, "Access denied") || strings.Contains(msg, "Interactive authentication required")) {
			r.bad("polkit deny", "%s: exit %d %q, want a polkit refusal", what, res.ExitCode, msg)
			continue
		}
		r.ok("polkit deny", "%-62s refused (%s)", what, msg[strings.LastIndex(msg, ": ")+2:])
	}
	logind := func(prop string) string {
		v, _ := b.Run("busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1",
			"org.freedesktop.login1.Manager", prop)
		return strings.TrimSpace(v)
	}
	if kup, only := logind("KillUserProcesses"), logind("KillOnlyUsers"); kup == "b true" && only == `as 1 "user"` {
		r.ok("logind", "KillUserProcesses=yes, KillOnlyUsers=user: a session stop ends what user launched in it")
	} else {
		r.bad("logind", "KillUserProcesses %q, KillOnlyUsers %q", kup, only)
	}

	for _, want := range []struct{ path, stat string }{
		{"/etc/sudoers.d/90-cocoonbox-user", "440 root:root"},
		{"/etc/polkit-1/rules.d/60-cocoonbox-cbagent.rules", "644 root:root"},
		{"/etc/cocoonbox/agent.env", "640 root:cbagent"},
		{"/etc/cocoonbox/desk.env", "644 root:root"},
		{"/var/lib/cocoonbox", "700 cbagent:cbagent"},
		{"/run/cocoonbox", "2750 user:cbagent"},
		{"/run/cocoonbox-x", "700 user:user"},
		{"/run/cocoonbox-identity", "755 root:root"},
		{"/workspace", "755 user:user"},
		{"/etc/environment.d/20-desk.conf", "644 root:root"},
	} {
		got, err := b.Run("stat", "-c", "%a %U:%G", want.path)
		got = strings.TrimSpace(got)
		switch {
		case err != nil:
			r.bad("path", "%s: %v", want.path, err)
		case got != want.stat:
			r.bad("path", "%-48s %s, want %s", want.path, got, want.stat)
		default:
			r.ok("path", "%-48s %s", want.path, got)
		}
	}
	link, err := b.Run("readlink", "/etc/systemd/user/cua-driver.service")
	if strings.TrimSpace(link) == "/dev/null" {
		r.ok("cua-driver", "masked for every user (/etc/systemd/user/cua-driver.service → /dev/null)")
	} else {
		r.bad("cua-driver", "not masked: %q %v", link, err)
	}
	desk, err := b.Run("grep", "^GW_BASE_URL=", "/etc/cocoonbox/desk.env")
	r.check("desk.env", err, "%s", strings.TrimSpace(desk))
	for _, p := range []string{"/etc/opt/chrome/policies/managed/cocoonbox.json", "/etc/opt/chrome/policies/recommended/cocoonbox.json",
		"/etc/chromium/policies/managed/cocoonbox.json", "/etc/chromium/policies/recommended/cocoonbox.json"} {
		body, err := b.Run("cat", p)
		r.check("browser policy", err, "%-52s %s", p, strings.Join(strings.Fields(body), " "))
	}
}
