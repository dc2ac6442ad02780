package boxes

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// identityWriter is the guest's identity writer (Contract: Box identity:
// the api runs it through sandboxd at every boot and wake).
const identityWriter = "/usr/local/lib/cocoonbox/identity"

var machineIDRule = regexp.MustCompile(`^[0-9a-f]{32}$`)

// writeIdentity is what provision runs in the box (sh -c, $1 the
// hostname): the identity written from stdin, then a wait of up to 10 s
// for the guest's hostname helper to follow it (the kernel hostname, then
// its marked /etc/hosts line, its last step), so a box answered running
// has its hostname: a script's next rsh sees the name, not the machine id.
// Then /etc/machine-id, read back. A wake's hostname is the box's already:
// no wait.
const writeIdentity = identityWriter + ` write || exit
i=0
until read -r h < /proc/sys/kernel/hostname && [ "$h" = "$1" ] && grep -qF "$(printf '\t%s\t# cocoonbox-hostname' "$1")" /etc/hosts; do
	i=$((i+1))
	if [ "$i" -ge 1000 ]; then echo "the hostname did not follow the identity within 10 s: it is $h, not $1" >&2; exit 1; fi
	sleep 0.01
done
cat /etc/machine-id`

// Record is the box's identity record with a new wake id (Contract: Box
// identity): box_id, a random wake_id, the box's ed25519 public key and
// its key_id, and the name.
func (b *Box) Record() *identity.Identity {
	pub := ed25519.NewKeyFromSeed(b.seed).Public().(ed25519.PublicKey)
	var w [16]byte
	rand.Read(w[:])
	return &identity.Identity{BoxID: b.ID, WakeID: base64.RawURLEncoding.EncodeToString(w[:]),
		KeyID: identity.KeyID(pub), PublicKey: identity.EncodePublicKey(pub), Name: b.Name}
}

// provision writes what a boot or a wake needs, in this order: on a wake
// a new /etc/machine-id (Contract: Journal: cocoonbox-machine-id.path
// restarts journald under it) and the claim env entries again (a boot had
// them before it), then the identity through the guest's `identity write`
// and a wait for the hostname to follow its name (writeIdentity), reading
// back /etc/machine-id; then the box is running.
func (r *run) provision(ctx context.Context, wake bool) error {
	rec := r.b.Record()
	if wake {
		var id [16]byte
		rand.Read(id[:])
		mid := hex.EncodeToString(id[:])
		if err := r.sup.PutFile(ctx, r.b.ID, sandbox.File{Path: "/etc/machine-id", Data: []byte(mid + "\n"), Mode: 0o444}); err != nil {
			return fmt.Errorf("machine-id: %w", supervisorError(err))
		}
		if err := r.s.setClaims(ctx, r.sup, r.b); err != nil {
			return fmt.Errorf("claim env: %w", err)
		}
	}
	host, err := rec.Hostname()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	out, err := ExecIn(ctx, r.sup, r.b.ID, rec.Marshal(), "sh", "-c", writeIdentity, "sh", host)
	if err != nil {
		return fmt.Errorf("identity write: %w", err)
	}
	mid := strings.TrimSpace(out)
	if !machineIDRule.MatchString(mid) {
		return fmt.Errorf("the box's /etc/machine-id reads %q, not 32 hex digits", mid)
	}
	r.b.WakeID, r.b.MachineID = rec.WakeID, mid
	return r.state(ctx, Running)
}

// ExecIn runs a command (args, not a shell line) in machine id of sup as
// root with stdin, answering its stdout; a non-zero exit is an error
// carrying its stderr, a supervisor's error is ErrUnavailable or
// ErrNotFound as supervisorError maps it. Tests that drive boxes through
// the api use it to look inside a box.
func ExecIn(ctx context.Context, sup sandbox.Supervisor, id string, stdin []byte, args ...string) (string, error) {
	p, err := sup.Exec(ctx, id, sandbox.ExecRequest{Args: args})
	if err != nil {
		return "", supervisorError(err)
	}
	go func() {
		_, _ = io.Copy(p.Stdin(), bytes.NewReader(stdin))
		p.Stdin().Close()
	}()
	var stdout, stderr bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, p.Stderr()); close(done) }()
	_, _ = io.Copy(&stdout, p.Stdout())
	<-done
	st, err := p.Wait()
	if err != nil {
		return "", supervisorError(err)
	}
	if st.Code != 0 {
		return "", fmt.Errorf("%s exited %d: %s", args[0], st.Code, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
