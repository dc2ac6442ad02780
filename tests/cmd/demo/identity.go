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
	register(20, "box identity and hostname (a boot, then a wake that renames)", identityStep)
}

// demoBoxID is the box id the demo plays the api for; other steps may use
// it (it is what an empty name maps to).
const demoBoxID = "cb-d3m0b0x1"

// msgHostnameSet is cocoonbox-hostname's MESSAGE_ID of a hostname it set.
const msgHostnameSet = "e0b601500b3d4870896d5094c0d12f6f"

// writeIdentity does what the api does at every boot and wake: a new
// ed25519 key and wake id, the record piped into `identity write` through
// the box's exec. It waits (up to 10 s) for the hostname to follow and
// returns the record and that hostname. Other demo steps may call it to
// give the box a name.
func writeIdentity(b *box.Box, name string) (*identity.Identity, string, error) {
	rec := box.NewIdentity(demoBoxID, name)
	want, err := rec.Hostname()
	if err != nil {
		return nil, "", err
	}
	if err := b.WriteIdentity(rec); err != nil {
		return nil, "", err
	}
	return rec, want, b.WaitHostname(want, 10*time.Second)
}

// identityStep writes an identity as the api does at a boot, shows what
// followed (kernel and static hostname, hostnamectl, the /etc/hosts line,
// the journal), then a second write, as at a wake, that renames the box.
func identityStep(ctx context.Context, b *box.Box, r *report) {
	for i, name := range []string{"demo_box", "renamed_at_wake"} {
		what := map[int]string{0: "boot", 1: "wake"}[i]
		start := time.Now()
		rec, host, err := writeIdentity(b, name)
		if err != nil {
			r.bad(what+": write", "%v", err)
			return
		}
		r.ok(what+": identity write", "box %s, key_id %s, name %q → hostname %s in %d ms",
			rec.BoxID, rec.KeyID, rec.Name, host, time.Since(start).Milliseconds())
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
	}
	// A record as the api would send it, but with a name no hostname can
	// carry: refused, naming the field and the rule; the name stays.
	bad := box.NewIdentity(demoBoxID, "bad/name")
	res, _ := b.Exec(box.Cmd{Args: []string{"/usr/local/lib/cocoonbox/identity", "write"},
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
