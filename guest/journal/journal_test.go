package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/wait"
	sdjournal "github.com/coreos/go-systemd/v22/journal"
)

// An entry reaches the admin with its MESSAGE_ID and fields: in the
// journal where journald runs, else on stderr. Each case asserts: a run
// where journald is present used to check nothing at all (issue 18, item 9).
func TestSendReachesJournalOrStderrWithFields(t *testing.T) {
	var buf bytes.Buffer
	l := New("cocoonbox-test")
	l.Stderr = &buf
	l.Echo = nil
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	run := hex.EncodeToString(nonce)
	l.Set("COCOONBOX_BOX_ID", "cb-abc")
	l.Send(Warning, "0123456789abcdef0123456789abcdef", "refused the file", "COCOONBOX_PATH", "/run/x", "COCOONBOX_TEST_RUN", run, "ODD")
	got := buf.String()
	if sdjournal.Enabled() {
		got = readJournal(t, "COCOONBOX_TEST_RUN="+run)
	}
	for _, want := range []string{"refused the file", "cb-abc", "/run/x", "0123456789abcdef0123456789abcdef"} {
		if !strings.Contains(got, want) {
			t.Errorf("entry %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "ODD") {
		t.Errorf("odd trailing field name was sent: %q", got)
	}
}

// readJournal waits for the entry matching match to be readable.
func readJournal(t *testing.T, match string) string {
	t.Helper()
	var out []byte
	wait.Eventually(t, 10*time.Second, "a journal entry with "+match, func() (bool, string) {
		var err error
		out, err = exec.Command("journalctl", "-o", "json", "--no-pager", match).Output()
		return err == nil && len(bytes.TrimSpace(out)) > 0, fmt.Sprintf("journalctl: %v", err)
	})
	return string(out)
}

// Without journald the entry goes to Stderr, never to Echo as well (an
// admin at a terminal would read every line twice). Journald is taken away
// for the test, so it runs on a host where journald runs too (it skipped
// there).
func TestFallbackWritesOnceEvenWithEcho(t *testing.T) {
	journaldHere = func() bool { return false }
	t.Cleanup(func() { journaldHere = sdjournal.Enabled })
	var out, echo bytes.Buffer
	l := New("cocoonbox-test")
	l.Stderr, l.Echo = &out, &echo
	l.Send(Err, "", "it broke")
	if !strings.HasPrefix(out.String(), "error: it broke") || echo.Len() != 0 {
		t.Errorf("stderr %q, echo %q; want the entry once, on stderr", out.String(), echo.String())
	}
}
