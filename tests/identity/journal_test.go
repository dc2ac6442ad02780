package boxidentity

import (
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// A new /etc/machine-id: journald is restarted by our path unit,
// `journalctl -m` shows entries from before and after, and plain
// `journalctl` only the new id's.
func TestNewMachineIDRestartsJournaldAndJournalctlMShowsBoth(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	oldID := strings.TrimSpace(b.Must(t, "cat", "/etc/machine-id"))
	oldPID := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "systemd-journald.service"))
	b.Must(t, "logger", "-t", "cbtest-wake", "before the new machine id")
	b.Must(t, "journalctl", "--sync")

	// As sandboxd does at a wake: a new id, renamed into place.
	b.MustSh(t, "systemd-id128 new >/etc/.machine-id.new && chmod 0444 /etc/.machine-id.new && mv -f /etc/.machine-id.new /etc/machine-id")
	newID := strings.TrimSpace(b.Must(t, "cat", "/etc/machine-id"))
	if newID == oldID || len(newID) != 32 {
		t.Fatalf("machine id %q → %q", oldID, newID)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pid := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "systemd-journald.service"))
		if pid != oldPID && pid != "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("journald still runs as PID %s 15 s after the new machine id", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// journald has its new PID before our oneshot's `systemctl restart`
	// returns and systemd logs "Finished" (a check right here failed one
	// run in a few): wait for the run to end.
	for {
		state := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "ActiveState", "cocoonbox-machine-id.service"))
		runs := b.Must(t, "journalctl", "-m", "--no-pager", "-q", "-o", "cat", "-u", "cocoonbox-machine-id.service")
		if state != "activating" && strings.Contains(runs, "Finished") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cocoonbox-machine-id.service is %s 15 s after the new machine id; its journal:\n%s", state, runs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "Result", "cocoonbox-machine-id.service")); res != "success" {
		t.Errorf("cocoonbox-machine-id.service Result=%s", res)
	}
	b.Must(t, "logger", "-t", "cbtest-wake", "after the new machine id")
	b.Must(t, "journalctl", "--sync")

	for _, id := range []string{oldID, newID} {
		if _, err := b.Run("test", "-d", "/var/log/journal/"+id); err != nil {
			t.Errorf("no persistent journal directory /var/log/journal/%s", id)
		}
	}
	all := b.Must(t, "journalctl", "-m", "--no-pager", "-q", "-o", "cat", "-t", "cbtest-wake")
	if !strings.Contains(all, "before the new machine id") || !strings.Contains(all, "after the new machine id") {
		t.Errorf("journalctl -m shows:\n%s\nwant the entries from before and after", all)
	}
	cur := b.Must(t, "journalctl", "--no-pager", "-q", "-o", "cat", "-t", "cbtest-wake")
	if strings.Contains(cur, "before") || !strings.Contains(cur, "after the new machine id") {
		t.Errorf("plain journalctl shows:\n%s\nwant only the entry after the new id", cur)
	}
}
