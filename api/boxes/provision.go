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
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/internal/steps"
)

// identityWriter is the guest's identity writer (Contract: Box identity:
// the api runs it through sandboxd at every boot and wake).
const identityWriter = "/usr/local/lib/cocoonbox/identity"

// writeIdentity is what provision runs in the box (sh -c, $1 the
// hostname): the identity written from stdin, then a wait of up to 10 s
// for the guest's hostname helper to follow it (the kernel hostname, then
// its marked /etc/hosts line, its last step), so a box answered running
// has its hostname: a script's next rsh sees the name, not the machine id.
// Then /etc/machine-id, read back. A wake's hostname is the box's already:
// no wait. The line "written" before the machine id marks the write's end
// (the steps' timeline: the write, then the hostname followed).
const writeIdentity = identityWriter + ` write || exit
echo written
` + followHostname

// newMachineID, put before writeIdentity on a wake, writes $3 (32 hex
// digits) as /etc/machine-id: a temporary file beside it, 0444 root,
// renamed over it, so a reader sees the old id or the new one, never half
// of one. With the box's own tools, and as few as it can: the shell
// itself makes the file (umask 0333, noclobber for O_EXCL; no subshell,
// which would be a fork), so a wake starts one process here (mv) where it
// started four. Not flushed (no fsync): a wake is no durable promise. A
// host that crashes before the kernel writes the file back leaves the old
// id or an empty file, and the box's next boot then takes the old id or a
// new one, which Boot reports and the api keeps (Machine.MachineID). An
// fsync waits for the host's disk: on a host busy writing (image builds,
// saves) it is what makes a wake's tail.
const newMachineID = `t=/etc/.cocoonbox-machine-id.$$
[ ! -e "$t" ] && [ ! -L "$t" ] || rm -f "$t"
umask 333; set -C
if ! { printf '%s\n' "$3" >"$t" && mv -f "$t" /etc/machine-id; }; then rm -f "$t"; echo "machine-id: not written" >&2; exit 1; fi
umask 022; set +C
`

// followHostname is writeIdentity's wait for the hostname and the read of
// /etc/machine-id. $1 is the name, $2 what the helper's marked /etc/hosts
// line holds (hostsMark).
const followHostname = waitHostname + `
IFS= read -r mid </etc/machine-id || [ -n "$mid" ] || exit
echo "$mid"`

// waitHostname waits up to 10 s for the guest's hostname helper to have
// followed the identity: the kernel hostname is $1, and /etc/hosts holds
// its marked line ($2), the helper's last step. Shell builtins only for
// the looks. When the first look fails, it first waits for the box's boot
// to finish (systemctl is-system-running --wait: one process, woken by
// systemd's StartupFinished signal, no polling), since the helper runs in
// the boot: a create's first command otherwise polled with a sleep every
// 10 ms all through the boot, fifty processes that took the boot's CPU
// (its boot ran about 90 ms slower). Then a sleep between two looks, for a
// helper that follows after the boot (a record written late). A wake, its
// name unchanged, passes at the first look.
const waitHostname = `marked() { while IFS= read -r l; do case $l in *"$2"*) return 0;; esac; done </etc/hosts; return 1; }
followed() { read -r h </proc/sys/kernel/hostname && [ "$h" = "$1" ] && marked "$@"; }
followed "$@" || systemctl is-system-running --wait >/dev/null 2>&1 || :
i=0
until followed "$@"; do
	i=$((i+1))
	if [ "$i" -ge 1000 ]; then echo "the hostname did not follow the identity within 10 s: it is $h, not $1" >&2; exit 1; fi
	sleep 0.01
done`

// hostsMark is what the hostname helper's /etc/hosts line for host holds.
func hostsMark(host string) string { return "\t" + host + "\t# cocoonbox-hostname" }

// bootCommands are a create's first commands for Boot (issue 24, Deliver
// 9), one shell: the guest's writer writes rec as soon as the box's init
// runs, so its hostname helper finds the record at its start; then the
// wait for the hostname to follow it (waitHostname), beside the rest of
// the boot, so Boot answers with the identity applied and a create needs
// no exec after it. One command, not two: each is a process through the
// box's door, in a boot short of CPU.
func bootCommands(rec *identity.Identity) ([]sandbox.Command, error) {
	host, err := rec.Hostname()
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	return []sandbox.Command{{Args: []string{"sh", "-c", bootIdentity, "sh", host, hostsMark(host)}, Stdin: rec.Marshal()}}, nil
}

// bootIdentity is bootCommands' shell: the record from stdin, then the
// wait for the hostname.
const bootIdentity = identityWriter + " write || exit\n" + waitHostname

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

// provision writes what a boot or a wake needs: on a wake a new
// /etc/machine-id (Contract: Journal: cocoonbox-machine-id.path restarts
// journald under it) and the claim env entries again (a boot had them
// before it), and the identity through the guest's `identity write`; then
// it waits for the hostname to follow its name and reads back
// /etc/machine-id; then the box is running. Unless Boot wrote the
// identity (booted), the claim env goes beside the one exec that writes
// the identity (and on a wake the machine id: newMachineID,
// writeIdentity), since its door key is the new wake id's: each exec into
// the box is a few processes, and a wake is mostly them.
func (r *run) provision(ctx context.Context, wake bool) error {
	return r.provisionWith(ctx, wake, nil, sandbox.Machine{})
}

// provisionWith is provision; booted, when not nil, is the record Boot's
// first commands wrote and waited for (bootCommands), and m the machine
// Boot answered: its machine id is the box's, and nothing is left to do
// in the box. Only a supervisor that does not know the id (an older
// sandboxd, an odd /etc/machine-id) leaves it to be read there.
func (r *run) provisionWith(ctx context.Context, wake bool, booted *identity.Identity, m sandbox.Machine) error {
	if booted != nil && sandbox.MachineIDRule.MatchString(m.MachineID) {
		r.b.WakeID, r.b.MachineID = booted.WakeID, m.MachineID
		return r.state(ctx, Running)
	}
	rec := booted
	if rec == nil {
		rec = r.b.Record()
	}
	host, err := rec.Hostname()
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	var out string
	var claims chan error
	// The claim env, with the door key of this incarnation (rec's wake
	// id), once the exec has started: the local supervisor holds the
	// machine while it renders, so the exec's start would wait for it.
	started := func() {
		claims = make(chan error, 1)
		go func() {
			defer steps.Begin(ctx, "claims")()
			claims <- r.s.setClaims(ctx, r.sup, r.b, rec.WakeID)
		}()
	}
	switch {
	case booted != nil:
		followed := steps.Begin(ctx, "identity.hostname")
		out, err = ExecIn(ctx, r.sup, r.b.ID, nil, "sh", "-c", followHostname, "sh", host, hostsMark(host))
		followed()
	case wake:
		var id [16]byte
		rand.Read(id[:])
		out, err = execSteps(ctx, r.sup, r.b.ID, rec.Marshal(), "identity", started,
			[]string{"sh", "-c", newMachineID + writeIdentity, "sh", host, hostsMark(host), hex.EncodeToString(id[:])})
	default:
		out, err = execSteps(ctx, r.sup, r.b.ID, rec.Marshal(), "identity", started, []string{"sh", "-c", writeIdentity, "sh", host, hostsMark(host)})
	}
	if claims != nil {
		if cerr := <-claims; cerr != nil {
			return fmt.Errorf("claim env: %w", cerr)
		}
	}
	if err != nil {
		return fmt.Errorf("identity write: %w", err)
	}
	mid := strings.TrimSpace(strings.TrimPrefix(out, "written\n"))
	if !sandbox.MachineIDRule.MatchString(mid) {
		return fmt.Errorf("the box's /etc/machine-id reads %q, not 32 hex digits", mid)
	}
	r.b.WakeID, r.b.MachineID = rec.WakeID, mid
	return r.state(ctx, Running)
}

// execSteps is ExecIn for a command whose stdout starts with a line
// "written": the steps' timeline gets step+".write" up to that line and
// step+".hostname" from there to the command's end. started, when not
// nil, is called once the command has started.
func execSteps(ctx context.Context, sup sandbox.Supervisor, id string, stdin []byte, step string, started func(), args []string) (string, error) {
	tl := steps.From(ctx)
	if tl == nil {
		return execIn(ctx, sup, id, "", stdin, started, nil, args...)
	}
	start := tl.Since()
	var written time.Duration
	out, err := execIn(ctx, sup, id, "", stdin, started, func(seen []byte) {
		if written == 0 && bytes.HasPrefix(seen, []byte("written\n")) {
			written = tl.Since()
		}
	}, args...)
	if written != 0 {
		tl.Add(steps.Span{Step: step + ".write", Start: start, End: written})
		tl.Add(steps.Span{Step: step + ".hostname", Start: written, End: tl.Since()})
	}
	return out, err
}

// ExecIn runs a command (args, not a shell line) in machine id of sup as
// root with stdin, answering its stdout; a non-zero exit is an error
// carrying its stderr, a supervisor's error is ErrUnavailable or
// ErrNotFound as supervisorError maps it. Tests that drive boxes through
// the api use it to look inside a box.
func ExecIn(ctx context.Context, sup sandbox.Supervisor, id string, stdin []byte, args ...string) (string, error) {
	return execIn(ctx, sup, id, "", stdin, nil, nil, args...)
}

// execIn is ExecIn as user ("" is root), calling started (when not nil)
// once the command has started, and seen (when not nil) with the stdout
// read so far after each read.
func execIn(ctx context.Context, sup sandbox.Supervisor, id, user string, stdin []byte, started func(), seen func([]byte), args ...string) (string, error) {
	p, err := sup.Exec(ctx, id, sandbox.ExecRequest{Args: args, User: user})
	if err != nil {
		return "", supervisorError(err)
	}
	if started != nil {
		started()
	}
	go func() {
		_, _ = io.Copy(p.Stdin(), bytes.NewReader(stdin))
		p.Stdin().Close()
	}()
	var stdout, stderr bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, p.Stderr()); close(done) }()
	if seen == nil {
		_, _ = io.Copy(&stdout, p.Stdout())
	} else {
		buf := make([]byte, 4096)
		for {
			n, err := p.Stdout().Read(buf)
			stdout.Write(buf[:n])
			seen(stdout.Bytes())
			if err != nil {
				break
			}
		}
	}
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
