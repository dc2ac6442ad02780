// Package sandboxtest is a box supervisor in memory (sandbox.Supervisor)
// for tests that drive boxes through the api without booting any: a
// machine is a record that moves through the states as the contract
// (package sandbox) says, its disk is the files PutFile wrote, a save is a
// copy of that disk and its size is the disk's bytes, a rebase keeps
// /home/user and /workspace and drops the rest. Exec answers the one
// command the api runs in a box, the guest's identity writer (see Exec);
// nothing else runs. Dial has no box network to reach.
//
// Hold stops every machine operation at its start until the test
// releases it, so a test sees the api mid-operation without guessing how
// long the work takes.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// Supervisor is the supervisor in memory. Its methods are safe for
// concurrent use; one lock serialises them, so each call on a machine
// sees the last one's end.
type Supervisor struct {
	mu       sync.Mutex
	images   []sandbox.Image
	machines map[string]*machine
	saves    map[string]*save
	caps     map[string]int
	gate     chan struct{} // Hold's; nil when not held
	events   []sandbox.Event
	watchers map[chan sandbox.Event]struct{}
}

// machine is one machine: what Get answers, its disk and what Exec wrote.
type machine struct {
	sandbox.Machine
	disk     map[string][]byte // path: data (PutFile's files)
	claims   []sandbox.ClaimEntry
	identity []byte // the last record the identity writer took
	hostname string // the record's hostname
	diskID   string // the machine id on its disk ("" none yet)
}

// save is one save: SaveInfo and a copy of the disk.
type save struct {
	sandbox.SaveInfo
	disk   map[string][]byte
	diskID string
}

// New is a supervisor that boots the images refs ("cbdesk:vN-TIER"),
// given oldest first; it panics on a ref that does not parse, a test's
// own constant.
func New(refs ...string) *Supervisor {
	s := &Supervisor{machines: map[string]*machine{}, saves: map[string]*save{}, caps: map[string]int{},
		watchers: map[chan sandbox.Event]struct{}{}}
	for _, ref := range refs {
		im, err := sandbox.ParseImageRef(ref)
		if err != nil {
			panic(fmt.Sprintf("sandboxtest.New: %v", err))
		}
		s.images = append(s.images, im)
	}
	return s
}

// Hold makes every Boot, Wake, Hibernate, Save, Restore, Rebase and
// Delete from now on wait at its start (or for its ctx's end) until
// release is called; a call already past its start runs on. Calling
// release again does nothing, so a test may defer it too, for the end of
// a test that failed while holding.
func (s *Supervisor) Hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	return sync.OnceFunc(func() {
		s.mu.Lock()
		if s.gate == gate {
			s.gate = nil
		}
		s.mu.Unlock()
		close(gate)
	})
}

// held waits at Hold's gate, if any.
func (s *Supervisor) held(ctx context.Context) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Identity is the identity record the box's identity writer last took
// in machine id (nil when none), as the guest wrote it.
func (s *Supervisor) Identity(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.machines[id]; m != nil {
		return slices.Clone(m.identity)
	}
	return nil
}

// Saves are the saves the supervisor holds, by id.
func (s *Supervisor) Saves() map[string]sandbox.SaveInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]sandbox.SaveInfo{}
	for id, sv := range s.saves {
		out[id] = sv.SaveInfo
	}
	return out
}

// Images lists the images of New.
func (s *Supervisor) Images(context.Context) ([]sandbox.Image, error) {
	return slices.Clone(s.images), nil
}

// SetTenantCap sets tenant's cap on machines.
func (s *Supervisor) SetTenantCap(_ context.Context, tenant string, maxClaims int) error {
	if maxClaims < 0 {
		return sandbox.Invalid("max_claims", "%d is negative", maxClaims)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caps[tenant] = maxClaims
	return nil
}

// claim checks that spec may make a new machine: valid, its id free,
// its image known, its tenant under its cap; s.mu held.
func (s *Supervisor) claim(spec sandbox.Spec) error {
	if err := spec.Check(); err != nil {
		return err
	}
	if s.machines[spec.ID] != nil {
		return fmt.Errorf("machine %s: %w", spec.ID, sandbox.ErrExists)
	}
	if !slices.ContainsFunc(s.images, func(im sandbox.Image) bool { return im.Ref == spec.Image }) {
		return fmt.Errorf("image %s: %w", spec.Image, sandbox.ErrNotFound)
	}
	limit, ok := s.caps[spec.Tenant]
	if !ok {
		limit = sandbox.DefaultMaxClaims
	}
	n := 0
	for _, m := range s.machines {
		if m.Tenant == spec.Tenant {
			n++
		}
	}
	if n >= limit {
		return fmt.Errorf("tenant %s holds %d machines, its cap: %w", spec.Tenant, n, sandbox.ErrCapExceeded)
	}
	return nil
}

// add makes a stopped machine of spec on disk; s.mu held.
func (s *Supervisor) add(spec sandbox.Spec, disk map[string][]byte, diskID string) sandbox.Machine {
	m := &machine{Machine: sandbox.Machine{ID: spec.ID, Tenant: spec.Tenant, Image: spec.Image, State: sandbox.Stopped},
		disk: disk, diskID: diskID}
	s.machines[spec.ID] = m
	s.event(m)
	return m.Machine
}

// Create makes a stopped machine with an empty disk.
func (s *Supervisor) Create(_ context.Context, spec sandbox.Spec) (sandbox.Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.claim(spec); err != nil {
		return sandbox.Machine{}, err
	}
	return s.add(spec, map[string][]byte{}, ""), nil
}

// get is machine id, or ErrNotFound; s.mu held.
func (s *Supervisor) get(id string) (*machine, error) {
	if m := s.machines[id]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("machine %s: %w", id, sandbox.ErrNotFound)
}

// in is machine id in one of states, else ErrState; s.mu held.
func (s *Supervisor) in(id string, states ...sandbox.State) (*machine, error) {
	m, err := s.get(id)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(states, m.State) {
		return nil, fmt.Errorf("machine %s is %s: %w", id, m.State, sandbox.ErrState)
	}
	return m, nil
}

// Boot starts a stopped (or failed) machine: the machine id on its disk,
// or a new one for a disk without, and first's commands run as Exec runs
// them, in order; one that fails leaves the machine stopped.
func (s *Supervisor) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	if err := sandbox.CheckFirst(first); err != nil {
		return sandbox.Machine{}, err
	}
	if err := s.held(ctx); err != nil {
		return sandbox.Machine{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.in(id, sandbox.Stopped, sandbox.Failed)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if m.diskID == "" {
		m.diskID = newMachineID()
	}
	m.State, m.Booted, m.MachineID = sandbox.Running, time.Now().UTC(), m.diskID
	for i, c := range first {
		if _, stderr, code := m.run(c.Args, c.Stdin); code != 0 {
			m.State, m.MachineID = sandbox.Stopped, ""
			return sandbox.Machine{}, fmt.Errorf("machine %s: first command %d exited %d: %s", id, i, code, stderr)
		}
	}
	s.event(m)
	return m.Machine, nil
}

// Get answers machine id.
func (s *Supervisor) Get(_ context.Context, id string) (sandbox.Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.get(id)
	if err != nil {
		return sandbox.Machine{}, err
	}
	return m.Machine, nil
}

// List answers tenant's machines ("" every machine), by id.
func (s *Supervisor) List(_ context.Context, tenant string) ([]sandbox.Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandbox.Machine
	for _, id := range slices.Sorted(maps.Keys(s.machines)) {
		if m := s.machines[id]; tenant == "" || m.Tenant == tenant {
			out = append(out, m.Machine)
		}
	}
	return out, nil
}

// PutFile writes f on a running machine's disk.
func (s *Supervisor) PutFile(_ context.Context, id string, f sandbox.File) error {
	if err := f.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.in(id, sandbox.Running)
	if err != nil {
		return err
	}
	m.disk[f.Path] = slices.Clone(f.Data)
	return nil
}

// File answers the file at path on machine id's disk (what PutFile or
// a restore's tar wrote) and whether it is there.
func (s *Supervisor) File(id, path string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.machines[id]
	if !ok {
		return nil, false
	}
	data, ok := m.disk[path]
	return slices.Clone(data), ok
}

// Claims answers machine id's claim env entries as last set (nil for an
// unknown machine): a test reads what a box was given.
func (s *Supervisor) Claims(id string) []sandbox.ClaimEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.get(id)
	if err != nil {
		return nil
	}
	return slices.Clone(m.claims)
}

// SetClaimEnv replaces the machine's claim env entries.
func (s *Supervisor) SetClaimEnv(_ context.Context, id string, entries []sandbox.ClaimEntry) error {
	if err := sandbox.CheckClaimEnv(entries); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.get(id)
	if err != nil {
		return err
	}
	m.claims = slices.Clone(entries)
	return nil
}

// Dial fails: a machine in memory has no ports.
func (s *Supervisor) Dial(_ context.Context, id string, port int) (net.Conn, error) {
	return nil, fmt.Errorf("machine %s port %d: sandboxtest has no box network: %w", id, port, sandbox.ErrUnavailable)
}

// Hibernate freezes a running machine.
func (s *Supervisor) Hibernate(ctx context.Context, id string) (sandbox.Machine, error) {
	return s.move(ctx, id, sandbox.Running, sandbox.Hibernated)
}

// Wake thaws a hibernated machine.
func (s *Supervisor) Wake(ctx context.Context, id string) (sandbox.Machine, error) {
	return s.move(ctx, id, sandbox.Hibernated, sandbox.Running)
}

// move moves machine id from state from to state to, after Hold.
func (s *Supervisor) move(ctx context.Context, id string, from, to sandbox.State) (sandbox.Machine, error) {
	if err := s.held(ctx); err != nil {
		return sandbox.Machine{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.in(id, from)
	if err != nil {
		return sandbox.Machine{}, err
	}
	m.State = to
	s.event(m)
	return m.Machine, nil
}

// Save copies the machine's disk as save saveID ("" a new name); its size
// is the bytes of the disk's files.
func (s *Supervisor) Save(ctx context.Context, id, saveID string) (sandbox.SaveInfo, error) {
	if saveID == "" {
		var b [8]byte
		rand.Read(b[:])
		saveID = "save-" + hex.EncodeToString(b[:])
	}
	if err := sandbox.CheckSaveID("save_id", saveID); err != nil {
		return sandbox.SaveInfo{}, err
	}
	if err := s.held(ctx); err != nil {
		return sandbox.SaveInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.get(id)
	if err != nil {
		return sandbox.SaveInfo{}, err
	}
	if old := s.saves[saveID]; old != nil && old.Machine != id {
		return sandbox.SaveInfo{}, fmt.Errorf("save %s is machine %s's: %w", saveID, old.Machine, sandbox.ErrExists)
	}
	sv := &save{SaveInfo: sandbox.SaveInfo{ID: saveID, Machine: id, Tenant: m.Tenant, Image: m.Image, Created: time.Now().UTC()},
		disk: maps.Clone(m.disk), diskID: m.diskID}
	for _, data := range sv.disk {
		sv.Size += int64(len(data))
	}
	s.saves[saveID] = sv
	return sv.SaveInfo, nil
}

// Restore makes a stopped machine with a copy of save saveID's disk.
func (s *Supervisor) Restore(ctx context.Context, saveID string, spec sandbox.Spec) (sandbox.Machine, error) {
	if err := s.held(ctx); err != nil {
		return sandbox.Machine{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sv := s.saves[saveID]
	if sv == nil {
		return sandbox.Machine{}, fmt.Errorf("save %s: %w", saveID, sandbox.ErrNotFound)
	}
	if spec.Image == "" {
		spec.Image = sv.Image
	}
	if err := s.claim(spec); err != nil {
		return sandbox.Machine{}, err
	}
	return s.add(spec, maps.Clone(sv.disk), sv.diskID), nil
}

// DeleteSave removes save saveID.
func (s *Supervisor) DeleteSave(_ context.Context, saveID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saves[saveID] == nil {
		return fmt.Errorf("save %s: %w", saveID, sandbox.ErrNotFound)
	}
	delete(s.saves, saveID)
	return nil
}

// Clone makes a stopped machine with a copy of sourceID's disk and no
// machine id (its first boot takes a new one).
func (s *Supervisor) Clone(_ context.Context, sourceID string, spec sandbox.Spec) (sandbox.Machine, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.get(sourceID)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if err := s.claim(spec); err != nil {
		return sandbox.Machine{}, err
	}
	return s.add(spec, maps.Clone(src.disk), ""), nil
}

// kept are the folders a rebase keeps (sandbox.Supervisor.Rebase).
var kept = []string{"/home/user/", "/workspace/"}

// Rebase moves the machine onto image, keeping the files under /home/user
// and /workspace; a running machine is booted again (its Booted moves).
func (s *Supervisor) Rebase(ctx context.Context, id, image string) (sandbox.Machine, error) {
	if err := s.held(ctx); err != nil {
		return sandbox.Machine{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.in(id, sandbox.Stopped, sandbox.Failed, sandbox.Running)
	if err != nil {
		return sandbox.Machine{}, err
	}
	if !slices.ContainsFunc(s.images, func(im sandbox.Image) bool { return im.Ref == image }) {
		return sandbox.Machine{}, fmt.Errorf("image %s: %w", image, sandbox.ErrNotFound)
	}
	for path := range m.disk {
		if !slices.ContainsFunc(kept, func(dir string) bool { return strings.HasPrefix(path, dir) }) {
			delete(m.disk, path)
		}
	}
	m.Image = image
	if m.State == sandbox.Running {
		m.Booted = time.Now().UTC()
	}
	s.event(m)
	return m.Machine, nil
}

// Delete removes the machine (not its saves).
func (s *Supervisor) Delete(ctx context.Context, id string) error {
	if err := s.held(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.get(id)
	if err != nil {
		return err
	}
	delete(s.machines, id)
	m.State = sandbox.Absent
	s.event(m)
	return nil
}

// event records m's state as the next event and sends it to the
// watchers, dropping one whose channel is full; s.mu held.
func (s *Supervisor) event(m *machine) {
	e := sandbox.Event{Seq: uint64(len(s.events)) + 1, Machine: m.ID, Tenant: m.Tenant, State: m.State, Time: time.Now().UTC()}
	s.events = append(s.events, e)
	for ch := range s.watchers {
		select {
		case ch <- e:
		default:
			delete(s.watchers, ch)
			close(ch)
		}
	}
}

// watchBuffer is how many events a watcher may be behind before it is
// dropped.
const watchBuffer = 256

// Watch streams the events after after, then each new one, until ctx
// ends.
func (s *Supervisor) Watch(ctx context.Context, after uint64) (<-chan sandbox.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan sandbox.Event, watchBuffer+len(s.events))
	for _, e := range s.events {
		if e.Seq > after {
			ch <- e
		}
	}
	s.watchers[ch] = struct{}{}
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.watchers[ch]; ok {
			delete(s.watchers, ch)
			close(ch)
		}
	}()
	return ch, nil
}

// newMachineID is a random machine id (32 lowercase hex digits).
func newMachineID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var _ sandbox.Supervisor = (*Supervisor)(nil)

// errNoProgram is what Exec's process says of a command it cannot run.
var errNoProgram = errors.New("sandboxtest runs only the identity writer (" + identityWriter + ")")
