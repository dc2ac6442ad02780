package local

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"golang.org/x/sys/unix"
)

// Create implements sandbox.Supervisor.
func (s *Supervisor) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Machine, error) {
	return s.newMachine(spec, func(m *machine) error { return nil })
}

// newMachine claims spec's id under the tenant cap, lets fill make the
// disk, and records the machine; a failure leaves nothing behind.
func (s *Supervisor) newMachine(spec sandbox.Spec, fill func(m *machine) error) (sandbox.Machine, error) {
	if err := spec.Check(); err != nil {
		return sandbox.Machine{}, err
	}
	if spec.Image == "" {
		return sandbox.Machine{}, sandbox.Invalid("spec.image", "no image given")
	}
	if strings.HasPrefix(spec.ID, spareIDPrefix) {
		return sandbox.Machine{}, sandbox.Invalid("spec.id", "must not begin with "+spareIDPrefix+", the supervisor's spares' names")
	}
	if _, err := s.imageRoot(spec.Image); err != nil {
		return sandbox.Machine{}, err
	}
	m, err := s.claim(spec)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if err := os.Mkdir(m.dir, 0o700); err != nil {
		s.unclaim(m)
		return sandbox.Machine{}, fmt.Errorf("machine %s: %w", m.ID, err)
	}
	err = fill(m)
	if err == nil {
		err = m.save()
	}
	if err != nil {
		os.RemoveAll(m.dir)
		s.unclaim(m)
		return sandbox.Machine{}, err
	}
	m.op.Unlock()
	s.setState(m, sandbox.Stopped, "created")
	return m.view(), nil
}

// Boot implements sandbox.Supervisor.
func (s *Supervisor) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	if err := sandbox.CheckFirst(first); err != nil {
		return sandbox.Machine{}, err
	}
	m, err := s.find(id)
	if err != nil {
		return sandbox.Machine{}, err
	}
	defer m.op.Unlock()
	if st := m.view().State; st != sandbox.Stopped && st != sandbox.Failed {
		return m.view(), fmt.Errorf("machine %s is %s; only a stopped or failed one boots: %w", id, st, sandbox.ErrState)
	}
	if err := s.bootLocked(ctx, m, first); err != nil {
		return m.view(), err
	}
	return m.view(), nil
}

// bootLocked boots m (the caller holds m.op); boot renders the claim env
// and runs first as soon as the box's init runs.
func (s *Supervisor) bootLocked(ctx context.Context, m *machine, first []sandbox.Command) error {
	s.setState(m, sandbox.Starting, "")
	err := s.boot(ctx, m, first)
	if err != nil {
		s.setState(m, sandbox.Failed, err.Error())
		return err
	}
	s.setState(m, sandbox.Running, "")
	return nil
}

// shutdown stops a booted machine for good reason; the caller holds m.op.
func (s *Supervisor) shutdown(m *machine, why string) {
	if m.view().Leader == 0 {
		return
	}
	s.stop(m)
	s.setState(m, sandbox.Stopped, why)
}

// Hibernate implements sandbox.Supervisor.
func (s *Supervisor) Hibernate(ctx context.Context, id string) (sandbox.Machine, error) {
	return s.freeze(ctx, id, true)
}

// Wake implements sandbox.Supervisor.
func (s *Supervisor) Wake(ctx context.Context, id string) (sandbox.Machine, error) {
	return s.freeze(ctx, id, false)
}

func (s *Supervisor) freeze(ctx context.Context, id string, frozen bool) (sandbox.Machine, error) {
	m, err := s.find(id)
	if err != nil {
		return sandbox.Machine{}, err
	}
	defer m.op.Unlock()
	from, to := sandbox.Running, sandbox.Hibernated
	if !frozen {
		from, to = to, from
	}
	if st := m.view().State; st != from {
		return m.view(), fmt.Errorf("machine %s is %s, not %s: %w", id, st, from, sandbox.ErrState)
	}
	if !frozen {
		s.quiet() // a wake comes first (yield.go)
	}
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if err := r.cg.SetFrozen(ctx, frozen); err != nil {
		// Whatever happened, the box must not stay half frozen.
		_ = r.cg.SetFrozen(context.Background(), false)
		return m.view(), fmt.Errorf("machine %s: %w", id, err)
	}
	s.setState(m, to, "")
	return m.view(), nil
}

// Delete implements sandbox.Supervisor. A booted machine is killed, not
// halted: its disk goes next, so nothing a clean halt would flush is kept,
// and a halt ran up to stop's 20 s limit on a loaded host (issue 24: a
// Delete of 20.5 s).
func (s *Supervisor) Delete(ctx context.Context, id string) error {
	m, err := s.find(id)
	if err != nil {
		return err
	}
	defer m.op.Unlock()
	s.kill(m)
	if err := os.RemoveAll(m.dir); err != nil {
		s.setState(m, sandbox.Failed, "delete: "+err.Error())
		return fmt.Errorf("remove the disk of %s: %w", id, err)
	}
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
	s.setState(m, sandbox.Absent, "deleted")
	return nil
}

// PutFile implements sandbox.Supervisor.
func (s *Supervisor) PutFile(ctx context.Context, id string, f sandbox.File) error {
	if err := f.Check(); err != nil {
		return err
	}
	d, err := s.doorOf(id)
	if err != nil {
		return err
	}
	return putFile(ctx, d, f)
}

// putScript writes stdin to a temporary file beside the target, sets its
// mode and owner, flushes it and renames it over the target, in the box
// with the box's own tools (so its names and mounts apply, and nothing on
// the host follows a link the box made). As few processes as it can (each
// costs milliseconds in a box, and the claim env is rendered at every
// boot and wake): the directory by the shell itself, no chown for root
// (mktemp made the file root's), no flush under /run (tmpfs: fsync does
// nothing there).
const putScript = `set -e; t=$(mktemp "${1%/*}/.cocoonbox-put.XXXXXX"); trap 'rm -f "$t"' EXIT; cat >"$t"; chmod "$2" "$t"; [ "$3" = root ] || chown "$3" "$t"; case $1 in /run/*) ;; *) sync "$t";; esac; mv -f "$t" "$1"; trap - EXIT`

func putFile(ctx context.Context, d Door, f sandbox.File) error {
	mode, owner := f.Mode, f.Owner
	if mode == 0 {
		mode = 0o644
	}
	if owner == "" {
		owner = "root"
	}
	req := sandbox.ExecRequest{Args: []string{"sh", "-c", putScript, "sh", f.Path, fmt.Sprintf("%o", mode.Perm()), owner}}
	if _, _, err := runIn(ctx, d, req, bytes.NewReader(f.Data)); err != nil {
		return fmt.Errorf("put %s: %w", f.Path, err)
	}
	return nil
}

// SetClaimEnv implements sandbox.Supervisor.
func (s *Supervisor) SetClaimEnv(ctx context.Context, id string, entries []sandbox.ClaimEntry) error {
	if err := sandbox.CheckClaimEnv(entries); err != nil {
		return err
	}
	m, err := s.find(id)
	if err != nil {
		return err
	}
	defer m.op.Unlock()
	m.mu.Lock()
	m.claims = append([]sandbox.ClaimEntry(nil), entries...)
	m.inject = injectionsOf(m.claims)
	m.mu.Unlock()
	if m.view().State != sandbox.Running {
		return nil // rendered at the next boot
	}
	m.mu.Lock()
	r := m.run
	m.mu.Unlock()
	if r == nil {
		return fmt.Errorf("machine %s is not booted: %w", m.ID, sandbox.ErrState)
	}
	return s.renderClaimEnv(ctx, m, r)
}

// renderClaimEnv writes the guest entries to /run/silkd.env (0600 root:
// the vault runs as root and renders what login shells read) through r's
// door, unless this boot of the box has them there already: a wake sets
// the claim env again (a key may have changed while the box slept), and
// most wakes change nothing, while each write is processes in the box and
// a vault render on a box just thawed (issue 24, Deliver 9). The caller
// holds m.op, so the entries cannot change meanwhile.
func (s *Supervisor) renderClaimEnv(ctx context.Context, m *machine, r *running) error {
	m.mu.Lock()
	data := sandbox.RenderClaimEnv(m.claims)
	m.mu.Unlock()
	if r.claimEnv != nil && bytes.Equal(r.claimEnv, data) {
		return nil
	}
	if err := putFile(ctx, r.door, sandbox.File{Path: sandbox.ClaimEnvPath, Data: data, Mode: 0o600}); err != nil {
		r.claimEnv = nil
		return err
	}
	r.claimEnv = append([]byte{}, data...) // never nil once written, even empty
	return nil
}

// HostClaims returns a machine's host-only claim env entries (Guest
// false), in SetClaimEnv's order, for the egress proxy's injection; nil
// when it has none; sandbox.ErrInvalid or ErrNotFound for a bad or unknown
// id.
func (s *Supervisor) HostClaims(id string) ([]sandbox.ClaimEntry, error) {
	m, err := s.find(id)
	if err != nil {
		return nil, err
	}
	defer m.op.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []sandbox.ClaimEntry
	for _, e := range m.claims {
		if !e.Guest {
			out = append(out, e)
		}
	}
	return out, nil
}

// Exec implements sandbox.Supervisor.
func (s *Supervisor) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.Process, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	d, err := s.doorOf(id)
	if err != nil {
		return nil, err
	}
	return d.Start(ctx, req)
}

// Dial implements sandbox.Supervisor.
func (s *Supervisor) Dial(ctx context.Context, id string, port int) (net.Conn, error) {
	if err := sandbox.CheckPort(port); err != nil {
		return nil, err
	}
	d, err := s.doorOf(id)
	if err != nil {
		return nil, err
	}
	c, err := d.Dial(ctx, port)
	if err != nil {
		// Nothing listens there (yet): the caller may try again.
		return nil, fmt.Errorf("relay to 127.0.0.1:%d in %s: %v: %w", port, id, err, sandbox.ErrUnavailable)
	}
	return c, nil
}

// Rebase implements sandbox.Supervisor.
func (s *Supervisor) Rebase(ctx context.Context, id, image string) (sandbox.Machine, error) {
	if _, err := s.imageRoot(image); err != nil {
		return sandbox.Machine{}, err
	}
	m, err := s.find(id)
	if err != nil {
		return sandbox.Machine{}, err
	}
	defer m.op.Unlock()
	st := m.view().State
	if st == sandbox.Hibernated || st == sandbox.Starting {
		return m.view(), fmt.Errorf("machine %s is %s; wake it first: %w", id, st, sandbox.ErrState)
	}
	wasRunning := st == sandbox.Running
	s.shutdown(m, "rebase onto "+image)
	if err := rebaseUpper(m.dir); err != nil {
		s.setState(m, sandbox.Failed, "rebase: "+err.Error())
		return m.view(), fmt.Errorf("rebase %s: %w", id, err)
	}
	old := m.Image
	m.Image = image
	if err := m.save(); err != nil {
		m.Image = old
		return m.view(), err
	}
	if wasRunning {
		if err := s.bootLocked(ctx, m, nil); err != nil {
			return m.view(), err
		}
	}
	return m.view(), nil
}

// Clone implements sandbox.Supervisor.
func (s *Supervisor) Clone(ctx context.Context, sourceID string, spec sandbox.Spec) (sandbox.Machine, error) {
	src, err := s.find(sourceID)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if spec.Image == "" {
		spec.Image = src.Image
	}
	srcDir := src.dir
	defer src.op.Unlock()
	// A running source is flushed first; its copy is what is on disk.
	if err := syncFS(srcDir); err != nil {
		return sandbox.Machine{}, err
	}
	return s.newMachine(spec, func(m *machine) error {
		if err := copyUpper(srcDir, m.dir); err != nil {
			return err
		}
		return resetMachineID(m.dir)
	})
}

// syncFS flushes the whole file system dir is on (syncfs(2)), so that a
// running machine's disk, read next, holds what its processes wrote.
func syncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("flush the disk of %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("flush the disk of %s: %w", dir, err)
	}
	return nil
}
