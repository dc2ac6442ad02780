package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() { register(40, "packages (the user's list, reinstalled at desktop start)", packagesStep) }

// packagesStep gives user a package list as a restored home would bring
// it (two real packages and a hostile line), starts the reconciler as a
// desktop start would, and shows what it did; then user installs one more
// package with sudo apt-get and the hook records it.
func packagesStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	const list = "/home/user/.config/cocoonbox/packages"
	base, err := b.Sh("wc -l </etc/cocoonbox/packages.baseline")
	r.check("baseline", err, "/etc/cocoonbox/packages.baseline: %s packages (the image's apt-mark showmanual)", strings.TrimSpace(base))

	content := "hello\ncowsay\n-oAPT::Get::AllowUnauthenticated=1\n"
	if _, err := b.RunAs("user", "mkdir", "-p", "/home/user/.config/cocoonbox"); err != nil {
		r.bad("list", "%v", err)
		return
	}
	if err := b.WriteFile(list, []byte(content), 0o644, "user:user"); err != nil {
		r.bad("list", "%v", err)
		return
	}
	r.ok("list", "%s: %s", list, strings.ReplaceAll(strings.TrimSpace(content), "\n", " | "))

	// --wait: the unit is Type=exec (the boot never waits for it), so a
	// plain start returns as soon as the reconcile runs.
	start := time.Now()
	res, err := b.Exec(box.Cmd{Args: []string{"systemctl", "start", "--wait", "cocoonbox-packages.service"}, Timeout: 10 * time.Minute})
	took := time.Since(start).Seconds()
	switch {
	case err != nil:
		r.bad("reconcile", "%v", err)
	case res.ExitCode != 0:
		r.bad("reconcile", "cocoonbox-packages.service failed after %.1f s: %s", took, strings.TrimSpace(res.Stderr))
	default:
		r.ok("reconcile", "cocoonbox-packages.service finished in %.1f s (apt-get update, one bulk install)", took)
	}
	out, _ := b.Run("journalctl", "-m", "--no-pager", "-o", "cat", "-t", "cocoonbox-packages")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "refused") || strings.Contains(line, "installed listed") ||
			strings.Contains(line, "failed to install") || strings.Contains(line, "missing") {
			r.info("journal", "%s", line)
		}
	}
	for _, p := range []string{"hello", "cowsay"} {
		st, _ := b.Run("dpkg-query", "-W", "-f", "${Version} ${db:Status-Abbrev}", p)
		if strings.Contains(st, "ii") {
			r.ok("installed", "%s %s", p, strings.Fields(st)[0])
		} else {
			r.bad("installed", "%s is not installed (%q)", p, st)
		}
	}
	out, err = b.RunAs("user", "/usr/games/cowsay", "restored")
	r.check("cowsay", err, "%s", strings.Join(strings.Fields(out), " "))

	// Again, with nothing missing: one dpkg-query, no apt run.
	start = time.Now()
	res, err = b.Exec(box.Cmd{Args: []string{"systemctl", "start", "--wait", "cocoonbox-packages.service"}})
	if err == nil && res.ExitCode == 0 {
		r.ok("again", "nothing missing: done in %.2f s without apt-get", time.Since(start).Seconds())
	} else {
		r.bad("again", "exit %d %v %s", res.ExitCode, err, res.Stderr)
	}

	// The user's own apt run is recorded by the hook, as user.
	res, err = b.Exec(box.Cmd{User: "user", Args: []string{"sudo", "apt-get", "-q", "-y", "install", "sl"}, Timeout: 5 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		r.bad("record", "sudo apt-get install sl as user: exit %d %v", res.ExitCode, err)
		return
	}
	data, err := b.ReadFile(list)
	owner, _ := b.Run("stat", "-c", "%U:%G", list)
	r.check("record", err, "after `sudo apt-get install sl` the list is: %s (owned by %s)",
		strings.Join(strings.Fields(string(data)), " "), strings.TrimSpace(owner))
	if !strings.Contains(string(data), "sl\n") || strings.Contains(string(data), "APT::") {
		r.bad("record", "%s", fmt.Sprintf("unexpected list %q", data))
	}
}
