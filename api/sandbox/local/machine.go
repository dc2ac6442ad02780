package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/sandbox/egress"
	"github.com/cocoonbox/cocoonbox/internal/durable"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
)

// record is what StateDir/machines/ID/machine.json keeps of a machine.
type record struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Image   string    `json:"image"`
	Created time.Time `json:"created"`
}

// machine is one machine. op serialises the operations on it; mu guards
// the fields a reader looks at while an operation runs.
type machine struct {
	record
	dir string
	op  sync.Mutex

	mu     sync.Mutex
	state  sandbox.State
	claims []sandbox.ClaimEntry
	inject []egress.Injection // injectionsOf(claims), the proxy's snapshot
	run    *running           // nil unless booted
	booted time.Time
}

// running is a booted machine's host side.
type running struct {
	// name is the machine name nspawn booted it under: its machine's id,
	// or the spare's it was taken over from.
	name    string
	nspawn  *exec.Cmd
	exited  chan struct{}
	exitErr error
	leader  int
	link    boxLink
	addrOff int
	// uids is the box's uid range (userns.go), held while it runs.
	uids *uidRange
	cg   nspawn.Cgroups
	door Door
	// claimEnv is what this boot last wrote to /run/silkd.env (nil:
	// nothing yet, or a write failed); m.op guards it.
	claimEnv []byte
	// machineID is the id the box's systemd took at this boot
	// (bootMachineID; "" when nspawn alone knows it).
	machineID string
	// stopping is set before the supervisor stops the machine, so its exit
	// is not taken for a crash.
	stopping bool
}

func (m *machine) view() sandbox.Machine {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := sandbox.Machine{ID: m.ID, Tenant: m.Tenant, Image: m.Image, State: m.state, Booted: m.booted}
	if m.run != nil {
		v.Address = m.run.link.Addr.Addr().String()
		v.Leader = m.run.leader
		v.MachineID = m.run.machineID
	}
	return v
}

func (m *machine) save() error {
	data, err := json.MarshalIndent(m.record, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(m.dir, "machine.json"), append(data, '\n'), 0o600)
}

// door returns the door of a running machine, or ErrState.
func (m *machine) door() (Door, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != sandbox.Running || m.run == nil {
		return nil, fmt.Errorf("machine %s is %s, not running: %w", m.ID, m.state, sandbox.ErrState)
	}
	return m.run.door, nil
}

// doorOf returns the door of running machine id without holding its
// operation lock past the lookup: what goes through a door (an exec, a
// relay, a file) may run as long as it likes beside the machine's other
// calls. Errors: sandbox.ErrInvalid, ErrNotFound, ErrState.
func (s *Supervisor) doorOf(id string) (Door, error) {
	m, err := s.find(id)
	if err != nil {
		return nil, err
	}
	defer m.op.Unlock()
	return m.door()
}

func (s *Supervisor) loadMachines() error {
	entries, err := os.ReadDir(filepath.Join(s.cfg.StateDir, "machines"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(s.cfg.StateDir, "machines", e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "machine.json"))
		if err != nil {
			s.cfg.Log.Warn("machine directory without a record, left alone", "dir", dir, "err", err)
			continue
		}
		m := &machine{dir: dir, state: sandbox.Stopped}
		if err := json.Unmarshal(data, &m.record); err != nil || m.ID != e.Name() {
			s.cfg.Log.Warn("unreadable machine record, left alone", "dir", dir, "err", err)
			continue
		}
		s.byID[m.ID] = m
	}
	return nil
}

func sortMachines(ms []sandbox.Machine) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
}

// listImages reads the image roots cbdesk-vN-TIER in dir.
func listImages(dir string) ([]sandbox.Image, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	var out []sandbox.Image
	for _, e := range entries {
		ref, ok := strings.CutPrefix(e.Name(), "cbdesk-")
		if !ok {
			continue
		}
		img, err := sandbox.ParseImageRef("cbdesk:" + ref)
		if err != nil {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, e.Name(), "etc/cocoonbox/image")); err != nil || !st.Mode().IsRegular() {
			continue
		}
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tier != out[j].Tier {
			return out[i].Tier < out[j].Tier
		}
		return out[i].Version < out[j].Version
	})
	return out, nil
}

// imageRoot is the root directory of an image ref, or ErrNotFound.
func (s *Supervisor) imageRoot(ref string) (string, error) {
	img, err := sandbox.ParseImageRef(ref)
	if err != nil {
		return "", err
	}
	root := filepath.Join(s.cfg.Images, fmt.Sprintf("cbdesk-v%d-%s", img.Version, img.Tier))
	if _, err := os.Stat(filepath.Join(root, "etc/cocoonbox/image")); err != nil {
		return "", fmt.Errorf("image %s (%s): %w", ref, root, sandbox.ErrNotFound)
	}
	return root, nil
}

// eventLog keeps the last events and feeds the watchers.
type eventLog struct {
	mu   sync.Mutex
	seq  uint64
	keep []sandbox.Event
	subs map[chan sandbox.Event]struct{}
}

const keepEvents = 4096

func newEventLog() *eventLog { return &eventLog{subs: map[chan sandbox.Event]struct{}{}} }

func (l *eventLog) add(e sandbox.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e.Seq = l.seq
	l.keep = append(l.keep, e)
	if len(l.keep) > keepEvents {
		l.keep = l.keep[len(l.keep)-keepEvents:]
	}
	for ch := range l.subs {
		select {
		case ch <- e:
		default: // too slow: it watches again from its last Seq
			delete(l.subs, ch)
			close(ch)
		}
	}
}

func (l *eventLog) watch(ctx context.Context, after uint64) <-chan sandbox.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var backlog []sandbox.Event
	for _, e := range l.keep {
		if e.Seq > after {
			backlog = append(backlog, e)
		}
	}
	ch := make(chan sandbox.Event, len(backlog)+256)
	for _, e := range backlog {
		ch <- e
	}
	l.subs[ch] = struct{}{}
	go func() {
		<-ctx.Done()
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.subs[ch]; ok {
			delete(l.subs, ch)
			close(ch)
		}
	}()
	return ch
}
