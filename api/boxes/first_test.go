//go:build booted

package boxes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/guest/identity"
)

// firstSeen is the package's supervisor noting each Boot's first
// commands.
type firstSeen struct {
	sandbox.Supervisor
	mu    sync.Mutex
	boots [][]sandbox.Command
}

func (f *firstSeen) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	f.mu.Lock()
	f.boots = append(f.boots, first)
	f.mu.Unlock()
	return f.Supervisor.Boot(ctx, id, first...)
}

// Issue 24, Deliver 9: a create's identity is written beside the boot
// (Boot's first command, as soon as the box's init runs) rather than after
// it, so the hostname helper finds it at its start; the record the box
// holds at running is the one the api keeps, and the hostname is its
// name.
func TestCreateWritesTheIdentityAsBootsFirstCommand(t *testing.T) {
	t.Parallel()
	fs := &firstSeen{Supervisor: sup}
	e := newEnvWith(t, func(c *Config) { c.Hosts = map[string]sandbox.Supervisor{"local": fs} })
	u := e.user("first", 1, 1)
	b := e.create(u, "first-box")
	fs.mu.Lock()
	boots := slices.Clone(fs.boots)
	fs.mu.Unlock()
	if len(boots) != 1 || len(boots[0]) != 1 || !slices.Equal(boots[0][0].Args, []string{"sh", "-c", bootIdentity, "sh", "first-box", hostsMark("first-box")}) {
		t.Fatalf("Boot's first commands %+v; want one boot with the identity writer and the wait for the hostname", boots)
	}
	sent, err := identity.Parse(boots[0][0].Stdin)
	if err != nil {
		t.Fatalf("the first command's stdin: %v", err)
	}
	if sent.BoxID != b.ID || sent.Name != "first-box" || sent.WakeID != b.WakeID {
		t.Fatalf("the first command wrote %+v; the box is %s, wake %s", sent, b.ID, b.WakeID)
	}
	if held := sh(t, b.ID, "cat "+identity.Path); held != string(sent.Marshal()) {
		t.Fatalf("the box holds %q; Boot's first command wrote %q", held, sent.Marshal())
	}
	got := strings.Fields(sh(t, b.ID, "cat /proc/sys/kernel/hostname /etc/hostname"))
	if strings.Join(got, " ") != "first-box first-box" {
		t.Fatalf("at running the hostnames read %q", got)
	}
}

// execCounted is the package's supervisor counting Execs, and, with
// blind, answering Boot without the machine id, as a sandboxd older than
// Machine.MachineID does.
type execCounted struct {
	sandbox.Supervisor
	execs atomic.Int32
	blind bool
}

func (c *execCounted) Exec(ctx context.Context, id string, req sandbox.ExecRequest) (sandbox.Process, error) {
	c.execs.Add(1)
	return c.Supervisor.Exec(ctx, id, req)
}

func (c *execCounted) Boot(ctx context.Context, id string, first ...sandbox.Command) (sandbox.Machine, error) {
	m, err := c.Supervisor.Boot(ctx, id, first...)
	if c.blind {
		m.MachineID = ""
	}
	return m, err
}

// Issue 24, Deliver 9: a create runs nothing in the box after Boot (it ran
// one exec that waited for the hostname and read /etc/machine-id back,
// about 40 ms): Boot's first commands wait for the hostname, and Boot
// answers the machine id, which is the one the box's journal is under. A
// supervisor that answers no machine id (an older sandboxd) still gets it
// read in the box.
func TestACreateRunsNoExecAfterBootAndKeepsTheBoxsMachineID(t *testing.T) {
	t.Parallel()
	for _, blind := range []bool{false, true} {
		c := &execCounted{Supervisor: sup, blind: blind}
		e := newEnvWith(t, func(cf *Config) { cf.Hosts = map[string]sandbox.Supervisor{"local": c} })
		u := e.user(fmt.Sprintf("noexec-%v", blind), 1, 1)
		name := fmt.Sprintf("noexec-%v", blind)
		b := e.create(u, name)
		execs := c.execs.Load()
		if want := map[bool]int32{false: 0, true: 1}[blind]; execs != want {
			t.Errorf("blind %v: a create ran %d execs in the box; want %d", blind, execs, want)
		}
		got := strings.Fields(sh(t, b.ID, "cat /etc/machine-id /proc/sys/kernel/hostname; test -d /var/log/journal/"+b.MachineID+" && echo journal"))
		if strings.Join(got, " ") != b.MachineID+" "+name+" journal" {
			t.Errorf("blind %v: the box holds machine id, hostname and journal %q; the api recorded %s", blind, got, b.MachineID)
		}
	}
}

// A wake writes the machine id and the identity in one exec with the
// claim env set beside it (issue 24, Deliver 9); a claim env that cannot
// be set still ends the wake failed, naming it.
func TestAWakeWhoseClaimEnvFailsEndsFailedNamingIt(t *testing.T) {
	t.Parallel()
	fl := &flaky{Supervisor: sup}
	e := newEnvWith(t, func(c *Config) { c.Hosts = map[string]sandbox.Supervisor{"local": fl} })
	u := e.user("wake-claims", 1, 1)
	b := e.create(u, "wake-claims")
	e.do(u, e.s.Hibernate, b.ID)
	fl.fails.Store(1)
	ctx := context.Background()
	_, op, err := e.s.Ensure(ctx, Call{UserID: u, RequestID: rid(), Box: b.ID})
	if err != nil {
		t.Fatal(err)
	}
	last, err := e.s.WaitOperation(ctx, u, op.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if last.Phase != controlv1.Phase_PHASE_FAILED || !strings.Contains(last.Error, "claim env") {
		t.Fatalf("the wake ended %s (%q); want failed naming the claim env", last.Phase, last.Error)
	}
	if fl.fails.Load() > 0 {
		t.Fatal("the claim env did not fail as the test set up")
	}
}
