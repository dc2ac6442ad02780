package box

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// Until and Eventually are internal/wait's, under the names the box tests
// and the demo have always called them by.
var (
	Until      = wait.Until
	Eventually = wait.Eventually
)

// Entry is one journal entry: its fields (MESSAGE, MESSAGE_ID,
// COCOONBOX_BOX_ID, ...) as journalctl -o json gives them.
type Entry map[string]string

// Journal returns the entries with MESSAGE_ID messageID across every
// machine id of the box (journalctl -m: the history across wakes and
// clones), oldest first; matches are more journalctl matches
// (FIELD=value). A field journalctl gives as bytes (not UTF-8) is left out.
func (b *Box) Journal(messageID string, matches ...string) ([]Entry, error) {
	args := append([]string{"journalctl", "-m", "--no-pager", "-o", "json", "MESSAGE_ID=" + messageID}, matches...)
	out, err := b.Run(args...)
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		raw := map[string]any{}
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			return nil, fmt.Errorf("journalctl -o json line %q: %w", line, err)
		}
		e := Entry{}
		for k, v := range raw {
			if s, ok := v.(string); ok {
				e[k] = s
			}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// WaitJournal waits (timeout at most) until the box's journal holds more
// than after entries with MESSAGE_ID messageID (and matches), and returns
// them all: journald stores an entry a moment after a helper sent it.
func (b *Box) WaitJournal(t testing.TB, timeout time.Duration, after int, messageID string, matches ...string) []Entry {
	t.Helper()
	var entries []Entry
	Eventually(t, timeout, fmt.Sprintf("more than %d journal entries with MESSAGE_ID=%s %s", after, messageID, strings.Join(matches, " ")), func() (bool, string) {
		var err error
		entries, err = b.Journal(messageID, matches...)
		if err != nil {
			return false, err.Error()
		}
		return len(entries) > after, fmt.Sprintf("%d entries", len(entries))
	})
	return entries
}

// NewIdentity returns a valid identity record for boxID and name, with a
// fresh ed25519 key and wake id, as the api makes one (Contract: Box
// identity). (crypto/rand, under ed25519.GenerateKey, does not fail.)
func NewIdentity(boxID, name string) *identity.Identity {
	pub, _, _ := ed25519.GenerateKey(nil)
	return &identity.Identity{BoxID: boxID, WakeID: "wake-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		KeyID: identity.KeyID(pub), PublicKey: identity.EncodePublicKey(pub), Name: name}
}

// WriteIdentity writes id into the box as the api does through sandboxd:
// `identity write` with the record on stdin. A non-zero exit is an error
// with the writer's stderr.
func (b *Box) WriteIdentity(id *identity.Identity) error {
	res, err := b.Exec(Cmd{Args: []string{"/usr/local/lib/cocoonbox/identity", "write"}, Stdin: strings.NewReader(string(id.Marshal()))})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("identity write: exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// WaitHostname waits (timeout at most) until the box's kernel hostname is
// want: the hostname helper applies a write a moment after it.
func (b *Box) WaitHostname(want string, timeout time.Duration) error {
	return Until(timeout, "the kernel hostname "+want, func() (bool, string) {
		got, _ := b.Run("cat", "/proc/sys/kernel/hostname")
		return strings.TrimSpace(got) == want, strings.TrimSpace(got)
	})
}
