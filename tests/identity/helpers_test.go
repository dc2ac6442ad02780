//go:build booted

// Package boxidentity holds the booted-box tests of the box identity, the
// hostname and the journal across wakes (issue 3; Contract: Box identity,
// Journal). Each test boots its own throwaway box and is named after the
// "Must show" line it proves.
package boxidentity

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

const (
	writer = "/usr/local/lib/cocoonbox/identity"
	// msgRefused is cocoonbox-hostname's MESSAGE_ID for a refused identity.
	msgRefused = "ef3dd4313cec4853a7a8718ac879c8cc"
)

// record makes a valid identity record with a fresh ed25519 key, as the
// api does.
func record(t testing.TB, boxID, name string) *identity.Identity {
	t.Helper()
	return box.NewIdentity(boxID, name)
}

// write runs `identity write` in the box with data on stdin.
func write(t testing.TB, b *box.Box, data []byte) box.Result {
	t.Helper()
	res, err := b.Exec(box.Cmd{Args: []string{writer, "write"}, Stdin: strings.NewReader(string(data))})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mustWrite writes rec and fails the test unless the writer exits 0.
func mustWrite(t testing.TB, b *box.Box, rec *identity.Identity) {
	t.Helper()
	if res := write(t, b, rec.Marshal()); res.ExitCode != 0 {
		t.Fatalf("identity write: exit %d: %s", res.ExitCode, res.Stderr)
	}
}

// kernelHostname is the box's kernel hostname.
func kernelHostname(t testing.TB, b *box.Box) string {
	t.Helper()
	return strings.TrimSpace(b.Must(t, "cat", "/proc/sys/kernel/hostname"))
}

// waitHostname waits up to 15 s for the kernel hostname to become want.
func waitHostname(t testing.TB, b *box.Box, want string) {
	t.Helper()
	if err := b.WaitHostname(want, 15*time.Second); err != nil {
		t.Fatal(err)
	}
}

// checkHostname checks the kernel hostname, /etc/hostname, hostnamectl and
// /etc/hosts all show want, and that sudo resolves it.
func checkHostname(t *testing.T, b *box.Box, want string) {
	t.Helper()
	waitHostname(t, b, want)
	if got := strings.TrimSpace(b.Must(t, "cat", "/etc/hostname")); got != want {
		t.Errorf("/etc/hostname = %q, want %q", got, want)
	}
	for _, kind := range []string{"--static", "--transient"} {
		if got := strings.TrimSpace(b.Must(t, "hostnamectl", kind, "hostname")); got != want {
			t.Errorf("hostnamectl %s hostname = %q, want %q", kind, got, want)
		}
	}
	hosts := b.Must(t, "cat", "/etc/hosts")
	line := "127.0.1.1\t" + want + "\t# cocoonbox-hostname"
	if strings.Count(hosts, "# cocoonbox-hostname") != 1 || !strings.Contains(hosts, line+"\n") {
		t.Errorf("/etc/hosts lacks exactly one %q:\n%s", line, hosts)
	}
	// IPv4: /etc/hosts answers first with the marked line (for IPv6,
	// which /etc/hosts does not list, nss-myhostname answers).
	if got := strings.TrimSpace(b.Must(t, "getent", "ahostsv4", want)); !strings.HasPrefix(got, "127.0.1.1") {
		t.Errorf("getent ahostsv4 %s = %q, want 127.0.1.1 first", want, got)
	}
	res, err := b.Exec(box.Cmd{Args: []string{"sudo", "-n", "true"}, User: "user"})
	if err != nil || res.ExitCode != 0 || strings.Contains(res.Stderr, "resolve host") {
		t.Errorf("sudo as user: exit %d, stderr %q (%v)", res.ExitCode, res.Stderr, err)
	}
}

// journalCount counts the box's journal entries (all machine ids) with
// this MESSAGE_ID.
func journalCount(t testing.TB, b *box.Box, messageID string) int {
	t.Helper()
	entries, err := b.Journal(messageID)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// waitJournal waits up to 15 s for more than n entries with messageID and
// returns the newest one's message.
func waitJournal(t testing.TB, b *box.Box, messageID string, n int) string {
	t.Helper()
	entries := b.WaitJournal(t, 15*time.Second, n, messageID)
	return entries[len(entries)-1]["MESSAGE"]
}

func boxID(i int) string { return fmt.Sprintf("cb-%08x", i) }

// waitWatching waits up to 15 s until the hostname service watches the
// identity (active: it said READY=1 after its first run). A raw write that
// lands before the watch is set is only seen at the service's first read.
func waitWatching(t testing.TB, b *box.Box) {
	t.Helper()
	box.Eventually(t, 15*time.Second, "cocoonbox-hostname.service active", func() (bool, string) {
		svc, _ := b.Run("systemctl", "show", "-P", "ActiveState", "cocoonbox-hostname.service")
		return strings.TrimSpace(svc) == "active", strings.TrimSpace(svc)
	})
}
