//go:build booted

package boxidentity

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

// msgJournaldRestarted is cocoonbox-machine-id's MESSAGE_ID of a restart.
const msgJournaldRestarted = "0f09b4b77dc74d89998f8df597479bfa"

// A new /etc/machine-id: journald is restarted by our watch,
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
	box.Eventually(t, 15*time.Second, "journald restarted", func() (bool, string) {
		pid := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "systemd-journald.service"))
		return pid != oldPID && pid != "0", "journald PID " + pid
	})
	// journald has its new PID before the helper's `systemctl restart`
	// returns: wait for the helper's entry, written after it.
	b.WaitJournal(t, 15*time.Second, 0, msgJournaldRestarted, "COCOONBOX_MACHINE_ID="+newID)
	if s := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "ActiveState", "cocoonbox-machine-id.service")); s != "active" {
		t.Errorf("cocoonbox-machine-id.service is %s, want active (watching)", s)
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

// Contract: Journal. Two new ids in a row, the second written while
// journald is restarted for the first (a wake right after a clone): the
// journal ends under the second. One oneshot run per change missed the
// second (a path unit does not watch while its service runs) and journald
// stayed under the first (issue 18, item 8: the machine id watch moves onto
// pathwatch).
func TestTwoNewMachineIDsInARowJournaldFollowsTheLast(t *testing.T) {
	t.Parallel()
	b := box.Boot(t, box.Options{})
	newID := `systemd-id128 new >/etc/.machine-id.new && chmod 0444 /etc/.machine-id.new && mv -f /etc/.machine-id.new /etc/machine-id && cat /etc/machine-id`
	pid := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "systemd-journald.service"))
	b.MustSh(t, newID)
	// The second id lands right as journald comes back for the first, while
	// whatever restarted it may still be finishing.
	box.Eventually(t, 15*time.Second, "journald restarted for the first id", func() (bool, string) {
		now := strings.TrimSpace(b.Must(t, "systemctl", "show", "-P", "MainPID", "systemd-journald.service"))
		return now != pid && now != "0", "journald PID " + now
	})
	last := strings.TrimSpace(b.MustSh(t, newID))
	n := 0
	box.Eventually(t, 20*time.Second, "journald writing under the last id "+last, func() (bool, string) {
		n++
		marker := fmt.Sprintf("marker %d", n)
		// While journald restarts, logger or --sync may find no journald:
		// try again.
		if _, err := b.Run("logger", "-t", "cbtest-ids", marker); err != nil {
			return false, err.Error()
		}
		if _, err := b.Run("journalctl", "--sync"); err != nil {
			return false, err.Error()
		}
		out, _ := b.Run("journalctl", "--no-pager", "-q", "-o", "cat", "-D", "/var/log/journal/"+last, "-t", "cbtest-ids")
		return strings.Contains(out, marker+"\n"), fmt.Sprintf("the journal of %s holds %q", last, out)
	})
}
