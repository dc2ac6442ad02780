package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() {
	register(20, "box identity and hostname (written by the api at the boot)", identityStep)
}

// msgHostnameSet is cocoonbox-hostname's MESSAGE_ID of a hostname it set.
const msgHostnameSet = "e0b601500b3d4870896d5094c0d12f6f"

// readIdentity reads and checks the record the api wrote (Contract: Box
// identity), through the box's own reader rules: root's file, parsed and
// validated by guest/identity.
func readIdentity(b *box.Box) (*identity.Identity, error) {
	stat, err := b.Run("stat", "-c", "%a %U:%G", "/run/cocoonbox-identity", "/run/cocoonbox-identity/identity")
	if err != nil {
		return nil, err
	}
	if got := strings.Fields(stat); strings.Join(got, " ") != "755 root:root 644 root:root" {
		return nil, fmt.Errorf("/run/cocoonbox-identity and its file are %q, want 755 root:root and 644 root:root", stat)
	}
	data, err := b.ReadFile("/run/cocoonbox-identity/identity")
	if err != nil {
		return nil, err
	}
	return identity.Parse(data)
}

// identityStep shows the identity the api wrote at the boot: the record's
// box id and name are the api's, its key id is its key's; the hostname
// followed (kernel and static hostname, hostnamectl, the /etc/hosts line,
// the journal); then a record with a name no hostname can carry is
// refused by the guest's writer.
func identityStep(ctx context.Context, d *demo, r *report) {
	b := d.box
	rec, err := readIdentity(b)
	if err == nil && (rec.BoxID != d.id || rec.Name != d.name) {
		err = fmt.Errorf("the record names box %s %q, the api's is %s %q", rec.BoxID, rec.Name, d.id, d.name)
	}
	if err != nil {
		r.bad("identity", "%v", err)
		return
	}
	host, err := rec.Hostname()
	if err == nil {
		err = b.WaitHostname(host, 10*time.Second)
	}
	r.check("identity", err, "written by the api: box %s, name %q, key_id %s, wake_id %s → hostname %s",
		rec.BoxID, rec.Name, rec.KeyID, rec.WakeID, host)
	static, _ := b.Run("cat", "/etc/hostname")
	r.check("  /etc/hostname", expect(strings.TrimSpace(static), host), "%s", strings.TrimSpace(static))
	hc, err := b.Run("hostnamectl", "--static", "hostname")
	if err == nil {
		err = expect(strings.TrimSpace(hc), host)
	}
	r.check("  hostnamectl", err, "static hostname %s", strings.TrimSpace(hc))
	hosts, _ := b.Run("grep", "# cocoonbox-hostname", "/etc/hosts")
	r.check("  /etc/hosts", expect(strings.Fields(hosts + " x x")[1], host), "%s", strings.Join(strings.Fields(hosts), " "))
	res, _ := b.Exec(box.Cmd{Args: []string{"sudo", "-n", "hostname"}, User: "user"})
	r.check("  sudo as user", warnFree(res), "no \"unable to resolve host\" warning")
	entries, err := b.Journal(msgHostnameSet, "COCOONBOX_NEW_HOSTNAME="+host)
	if err == nil && len(entries) == 0 {
		err = fmt.Errorf("no hostname-set entry names %s", host)
	}
	msg := ""
	if len(entries) > 0 {
		msg = entries[len(entries)-1]["MESSAGE"]
	}
	r.check("  journal", err, "%s", msg)

	// A record as the api would send it, but with a name no hostname can
	// carry: refused, naming the field and the rule; the name stays.
	bad := box.NewIdentity(d.id, "bad/name")
	res, _ = b.Exec(box.Cmd{Args: []string{"/usr/local/lib/cocoonbox/identity", "write"},
		Stdin: strings.NewReader(string(bad.Marshal()))})
	if res.ExitCode == 65 {
		r.ok("bad record refused", "exit 65: %s", strings.TrimSpace(res.Stderr))
	} else {
		r.bad("bad record refused", "exit %d, want 65: %s", res.ExitCode, res.Stderr)
	}
}

func expect(got, want string) error {
	if got != want {
		return fmt.Errorf("%q, want %q", got, want)
	}
	return nil
}

func warnFree(res box.Result) error {
	if res.ExitCode != 0 || strings.Contains(res.Stderr, "resolve host") {
		return fmt.Errorf("sudo: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}
