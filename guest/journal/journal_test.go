package journal

import (
	"bytes"
	"strings"
	"testing"

	sdjournal "github.com/coreos/go-systemd/v22/journal"
)

// Without journald (unit tests run on a host without one) an entry must
// still reach the admin, with its MESSAGE_ID and fields.
func TestSendFallsBackToStderrWithFields(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	var buf bytes.Buffer
	l := New("cocoonbox-test")
	l.Stderr = &buf
	l.Set("COCOONBOX_BOX_ID", "cb-abc")
	l.Send(Warning, "0123456789abcdef0123456789abcdef", "refused the file", "COCOONBOX_PATH", "/run/x", "ODD")
	if !sdjournal.Enabled() {
		got := buf.String()
		for _, want := range []string{"warning: refused the file", `COCOONBOX_BOX_ID="cb-abc"`,
			`COCOONBOX_PATH="/run/x"`, `MESSAGE_ID="0123456789abcdef0123456789abcdef"`} {
			if !strings.Contains(got, want) {
				t.Errorf("stderr entry %q lacks %q", got, want)
			}
		}
		if strings.Contains(got, "ODD") {
			t.Errorf("odd trailing field name was sent: %q", got)
		}
	}
}
