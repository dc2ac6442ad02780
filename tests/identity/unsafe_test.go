//go:build booted

package boxidentity

import (
	"strings"
	"testing"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/tests/box"
)

// The identity directory or file made group-writable or owned by user, or
// the file replaced by a symlink: the hostname helper refuses, logs why,
// and the hostname stays.
func TestHostnameHelperRefusesUnsafeIdentity(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	cases := []struct {
		name string
		// spoil puts a record naming "evil" in place the unsafe way.
		spoil func(t *testing.T, data []byte)
		want  string
	}{
		{"group-writable file", func(t *testing.T, data []byte) {
			must(t, b.WriteFile(identity.Path, data, 0o664, "root"))
		}, "group- or world-writable"},
		{"group-writable directory", func(t *testing.T, data []byte) {
			b.Must(t, "chmod", "0775", identity.Dir)
			must(t, b.WriteFile(identity.Path, data, 0o644, "root"))
		}, "group- or world-writable"},
		{"file owned by user", func(t *testing.T, data []byte) {
			must(t, b.WriteFile(identity.Path, data, 0o644, "user"))
		}, "must belong to root"},
		{"directory owned by user", func(t *testing.T, data []byte) {
			b.Must(t, "chown", "user", identity.Dir)
			must(t, b.WriteFile(identity.Path, data, 0o644, "root"))
		}, "must belong to root"},
		{"file replaced by a symlink", func(t *testing.T, data []byte) {
			must(t, b.WriteFile("/root/evil-identity", data, 0o644, "root"))
			b.Must(t, "ln", "-s", "/root/evil-identity", identity.Dir+"/.link")
			b.Must(t, "mv", "-T", identity.Dir+"/.link", identity.Path)
		}, "symlink"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A good state first: root's 0755 directory, a good record.
			b.Must(t, "chown", "root:root", identity.Dir)
			b.Must(t, "chmod", "0755", identity.Dir)
			good := record(t, boxID(i), "safe-"+string(rune('a'+i)))
			mustWrite(t, b, good)
			waitHostname(t, b, good.Name)
			waitWatching(t, b)
			n := journalCount(t, b, msgRefused)

			c.spoil(t, record(t, boxID(i), "evil").Marshal())
			msg := waitJournal(t, b, msgRefused, n)
			if !strings.Contains(msg, c.want) {
				t.Errorf("journal says %q, want the reason %q", msg, c.want)
			}
			if got := kernelHostname(t, b); got != good.Name {
				t.Errorf("hostname is %q, want it to stay %q", got, good.Name)
			}
			if got := strings.TrimSpace(b.Must(t, "cat", "/etc/hostname")); got != good.Name {
				t.Errorf("/etc/hostname is %q, want it to stay %q", got, good.Name)
			}
			if res, _ := b.Exec(box.Cmd{Args: []string{writer, "show"}}); res.ExitCode != 73 {
				t.Errorf("identity show: exit %d, want 73 (unsafe); %s", res.ExitCode, res.Stderr)
			}
			b.Must(t, "rm", "-f", identity.Path, "/root/evil-identity")
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
