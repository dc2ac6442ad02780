//go:build booted

package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/cocoonbox/cocoonbox/internal/wait"
	"golang.org/x/sys/unix"
)

// spareSup starts a second supervisor, on its own bridge and state, that
// keeps one spare of each tier's newest image (v2-base here, and v1-desk
// when the catalog has the desk image); it is closed when the test ends,
// and the test fails if Close left a spare's disk behind.
func spareSup(t *testing.T) *Supervisor {
	t.Helper()
	state := filepath.Join(testRoot, "state-"+strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-"))
	s, err := New(context.Background(), Config{
		StateDir: state, Images: filepath.Join(testRoot, "images"),
		Network: Network{Bridge: "cbspare0", Gateway: netip.MustParsePrefix("10.206.0.1/16"), Ports: DefaultNetwork().Ports},
		Spares:  1,
		Log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var cgs []string
		s.mu.Lock()
		for _, list := range s.spares {
			for _, sp := range list {
				cgs = append(cgs, sp.r.cg.Dirs...)
			}
		}
		s.mu.Unlock()
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left, _ := os.ReadDir(filepath.Join(state, "spares")); len(left) != 0 {
			t.Errorf("Close left %d spare disks in %s", len(left), state)
		}
		if left, _ := filepath.Glob("/run/netns/cbspare0-*"); len(left) != 0 {
			t.Errorf("Close left the network namespaces %v", left)
		}
		for _, d := range cgs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Close left the spare's cgroup %s: %v", d, err)
			}
		}
		os.RemoveAll(state)
	})
	return s
}

// bootNew creates a machine of image on s (its id from prefix), boots it
// and deletes it when the test ends.
func bootNew(t *testing.T, s *Supervisor, prefix, image string) sandbox.Machine {
	t.Helper()
	ctx := context.Background()
	m, err := s.Create(ctx, sandbox.Spec{ID: newID(prefix), Tenant: "tenant-s", Image: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, m.ID) })
	if _, err := s.Boot(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	return m
}

// spareBooting waits for the pool to begin a spare's boot of image (the
// replacement of one a take just spent) and answers it as soon as it is
// registered.
func spareBooting(t *testing.T, s *Supervisor, image string) *spareBoot {
	t.Helper()
	var b *spareBoot
	wait.Eventually(t, time.Minute, "the pool booting a spare of "+image, func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		b = s.spareBoot
		return b != nil && b.image == image, fmt.Sprintf("booting %+v", b)
	})
	return b
}

// pooled waits until s holds a booted spare of image other than not, and
// answers it.
func pooled(t *testing.T, s *Supervisor, image string, not *spare) *spare {
	t.Helper()
	var got *spare
	wait.Eventually(t, 2*time.Minute, "a booted spare of "+image, func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sp := range s.spares[image] {
			if sp != not {
				got = sp
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d spares, none new", len(s.spares[image]))
	})
	return got
}

func statErr(path string) error { _, err := os.Stat(path); return err }

func mounted(path string) bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func TestABootOfAFreshMachineTakesOverASpareAndThePoolBootsAnother(t *testing.T) {
	s := spareSup(t)
	ctx := context.Background()
	sp := pooled(t, s, v2, nil)
	spareDir, spareLeader, spareID := sp.m.dir, sp.r.leader, sp.r.machineID
	if spareID == "" {
		t.Fatal("the spare reports no machine id")
	}
	m, err := s.Create(ctx, sandbox.Spec{ID: newID("taker"), Tenant: "tenant-s", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetClaimEnv(ctx, m.ID, []sandbox.ClaimEntry{{Name: "COCOONBOX_TEST_CLAIM", Value: "from-the-box", Guest: true}}); err != nil {
		t.Fatal(err)
	}
	m, err = s.Boot(ctx, m.ID, sandbox.Command{Args: []string{"sh", "-c", "cat >/run/first"}, Stdin: []byte("the box's own")})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != sandbox.Running || m.Leader != spareLeader || m.MachineID != spareID {
		t.Fatalf("booted %+v; want running on the spare's leader %d with its machine id %s", m, spareLeader, spareID)
	}
	run := func(line string) string {
		t.Helper()
		p, err := s.Exec(ctx, m.ID, sandbox.ExecRequest{Args: []string{"sh", "-c", line}})
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		out, _ := io.ReadAll(p.Stdout())
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if got := run("cat /run/first; echo; grep -h COCOONBOX_TEST_CLAIM /run/silkd.env; cat /etc/machine-id"); got != "the box's own\nCOCOONBOX_TEST_CLAIM=\"from-the-box\"\n"+spareID+"\n" {
		t.Errorf("in the box: %q", got)
	}
	dir := filepath.Join(s.cfg.StateDir, "machines", m.ID)
	if _, err := os.Stat(spareDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spare's directory %s is still there: %v", spareDir, err)
	}
	if !mounted(filepath.Join(dir, "root")) {
		t.Errorf("the machine's root %s/root is not the mount", dir)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "machine.json")); err != nil || !strings.Contains(string(data), m.ID) {
		t.Errorf("machine.json: %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(s.runDir, m.ID+".json")); err != nil {
		t.Errorf("no crash record for the machine: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.runDir, sp.m.ID+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spare's crash record is still there: %v", err)
	}
	s.mu.Lock()
	owner := s.addrs[sp.r.addrOff]
	s.mu.Unlock()
	if owner != m.ID {
		t.Errorf("the address is leased to %q, not the machine", owner)
	}
	next := pooled(t, s, v2, sp)
	if next.r.machineID == spareID {
		t.Error("the next spare has the taken one's machine id")
	}
	// It hibernates, wakes and is deleted as any box: the spare's cgroups
	// (removable only once empty), namespace and mount go with it.
	if _, err := s.Hibernate(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wake(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if got := run("echo awake"); got != "awake\n" {
		t.Errorf("after the wake: %q", got)
	}
	if err := s.Delete(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	for _, d := range sp.r.cg.Dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s is left: %v", d, err)
		}
	}
	if _, err := os.Stat(netnsPath(sp.r.link.NetNS)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s is left: %v", sp.r.link.NetNS, err)
	}
	if mounted(filepath.Join(dir, "root")) {
		t.Error("the root is still mounted")
	}
	// nspawn's own directory under /run for the name it booted under (a
	// killed nspawn leaves it, and a spare's name never comes back).
	if _, err := os.Stat("/run/systemd/nspawn/propagate/" + sp.m.ID); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("nspawn's propagate directory of %s is left: %v", sp.m.ID, err)
	}
}

func TestAMachineWithItsOwnDiskNeverTakesASpare(t *testing.T) {
	s := spareSup(t)
	ctx := context.Background()
	pooled(t, s, v2, nil)
	m := bootNew(t, s, "taker", v2)
	save, err := s.Save(ctx, m.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.DeleteSave(ctx, save.ID) })
	restored, err := s.Restore(ctx, save.ID, sandbox.Spec{ID: newID("taker"), Tenant: "tenant-s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, restored.ID) })
	sp := pooled(t, s, v2, nil)
	booted, err := s.Boot(ctx, restored.ID)
	if err != nil {
		t.Fatal(err)
	}
	if booted.Leader == sp.r.leader {
		t.Fatal("a restored machine took a spare over its own disk")
	}
	s.mu.Lock()
	still := len(s.spares[v2]) == 1 && s.spares[v2][0] == sp
	s.mu.Unlock()
	if !still {
		t.Error("the pool's spare is gone")
	}
}

// A machine that boots itself stops the spare the pool is booting, which
// the pool boots again after it: the second create of a burst (its spare
// taken by the first, the replacement just begun) no longer shares the
// cores with a spare no one waits for. Without yieldSpare the spare under
// way finishes beside the box and is pooled.
func TestAMachineBootingItselfStopsASpareStillBooting(t *testing.T) {
	s := spareSup(t)
	pooled(t, s, v2, nil)
	bootNew(t, s, "taker", v2)
	stopped := spareBooting(t, s, v2)
	// v1 is an image the pool keeps no spare of: this machine boots itself.
	bootNew(t, s, "own", v1)
	s.mu.Lock()
	yielded := stopped.yielded
	s.mu.Unlock()
	if !yielded {
		t.Fatalf("the spare %s booting when a machine began booting itself was not stopped", stopped.id)
	}
	next := pooled(t, s, v2, nil)
	if next.m.ID == stopped.id {
		t.Fatalf("the stopped spare %s was pooled", stopped.id)
	}
	if _, err := os.Stat(filepath.Join(s.cfg.StateDir, "spares", stopped.id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stopped spare's disk is still there: %v", err)
	}
	if ns, _, _ := linkNames(s.cfg.Network.Bridge, stopped.id); !errors.Is(statErr(netnsPath(ns)), os.ErrNotExist) {
		t.Errorf("the stopped spare's network namespace %s is still there", ns)
	}
	// Its name never comes back, so no later boot would reuse and clear
	// its cgroups.
	wait.Eventually(t, 2*time.Minute, "the stopped spare's cgroups removed", func() (bool, string) {
		var left []string
		for _, d := range stopped.cg.Dirs {
			if statErr(d) == nil {
				left = append(left, d)
			}
		}
		return len(stopped.cg.Dirs) > 0 && len(left) == 0, fmt.Sprint(left)
	})
}

// A wake freezes the spare the pool is booting, and the pool thaws it
// spareQuiet after the last wake: the wake's steps after Wake have the
// cores, and the spare keeps its progress (the same spare is pooled, not
// a new one). Without quiet the boot runs on beside the wake.
func TestAWakeFreezesTheSpareBootingUntilTheQuietEnds(t *testing.T) {
	// Long enough for the look below on a loaded host; not parallel.
	quiet := spareQuiet
	spareQuiet = 5 * time.Second
	t.Cleanup(func() { spareQuiet = quiet })
	s := spareSup(t)
	ctx := context.Background()
	pooled(t, s, v2, nil)
	sleeper := bootNew(t, s, "sleeper", v1)
	if _, err := s.Hibernate(ctx, sleeper.ID); err != nil {
		t.Fatal(err)
	}
	bootNew(t, s, "taker", v2)
	// The replacement's boot, as soon as the pool has begun it: nspawn has
	// not yet made the box's payload cgroup, nor perhaps started.
	b := spareBooting(t, s, v2)
	if _, err := s.Wake(ctx, sleeper.ID); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	frozen, booting := b.frozen, s.spareBoot == b
	s.mu.Unlock()
	if !booting {
		t.Fatal("the spare finished its boot between its start and the wake (about 0.7 s): nothing was left to freeze")
	}
	if !frozen {
		t.Fatal("the spare booting when a box woke was not frozen")
	}
	wait.Eventually(t, 2*time.Minute, "the kernel freezing the spare's boot", func() (bool, string) {
		ev, _ := os.ReadFile(filepath.Join(b.cg.Unified, "cgroup.events"))
		return strings.Contains(string(ev), "frozen 1"), string(ev)
	})
	next := pooled(t, s, v2, nil)
	if next.m.ID != b.id {
		t.Fatalf("the pool holds %s, not the frozen spare %s it thawed", next.m.ID, b.id)
	}
	ev, _ := os.ReadFile(filepath.Join(next.r.cg.Unified, "payload", "cgroup.events"))
	if !strings.Contains(string(ev), "frozen 0") {
		t.Fatalf("the pooled spare is still frozen: %s", ev)
	}
}

// A take that fails before the exchange (here the machine's directory is
// a mount point, which rename refuses: EBUSY, as another file system's
// directory gives EXDEV) leaves the spare whole in the pool: the machine
// boots itself, and the spare waits for the next create instead of being
// killed and booted again at every one.
func TestASpareWhoseTakeFailedBeforeTheExchangeGoesBackToThePool(t *testing.T) {
	s := spareSup(t)
	ctx := context.Background()
	sp := pooled(t, s, v2, nil)
	m, err := s.Create(ctx, sandbox.Spec{ID: newID("taker"), Tenant: "tenant-s", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.cfg.StateDir, "machines", m.ID)
	record, err := os.ReadFile(filepath.Join(dir, "machine.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		os.RemoveAll(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "machine.json"), record, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, m.ID) })
	booted, err := s.Boot(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if booted.Leader == sp.r.leader {
		t.Fatal("the machine runs on the spare though the exchange cannot have happened")
	}
	s.mu.Lock()
	back := slices.Contains(s.spares[v2], sp)
	s.mu.Unlock()
	if !back {
		t.Fatal("the spare whose take failed before the exchange is not in the pool")
	}
	select {
	case <-sp.r.exited:
		t.Fatal("the spare whose take failed went down")
	default:
	}
	if _, err := os.Stat(filepath.Join(sp.m.dir, "machine.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spare's directory keeps the machine's record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.runDir, m.ID+".json")); err != nil {
		t.Errorf("the machine, booted itself, has no crash record: %v", err)
	}
}

func TestASpareThatWentDownIsNeverHandedOut(t *testing.T) {
	s := spareSup(t)
	ctx := context.Background()
	dead := pooled(t, s, v2, nil)
	_ = unix.Kill(-dead.r.nspawn.Process.Pid, unix.SIGKILL)
	dead.r.cg.Kill()
	// Once the pool has seen it go (a box that dies after its Boot
	// answered is watchExit's, as for any box).
	<-dead.r.exited
	wait.Eventually(t, time.Minute, "the pool dropping the spare that went down", func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !slices.Contains(s.spares[v2], dead), "still pooled"
	})
	m, err := s.Create(ctx, sandbox.Spec{ID: newID("taker"), Tenant: "tenant-s", Image: v2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(ctx, m.ID) })
	booted, err := s.Boot(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if booted.MachineID == dead.r.machineID || booted.State != sandbox.Running {
		t.Fatalf("booted %+v on the spare that went down", booted)
	}
	if _, err := os.Stat(dead.m.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead spare's disk %s is left: %v", dead.m.dir, err)
	}
}

func TestAMachineIDCannotBeASparesName(t *testing.T) {
	_, err := sup.Create(context.Background(), sandbox.Spec{ID: "spare-0123", Tenant: "tenant-a", Image: v1})
	var inv *sandbox.InvalidError
	if !errors.As(err, &inv) || inv.Field != "spec.id" {
		t.Fatalf("create spare-0123: %v; want spec.id invalid", err)
	}
}

// A spare killed while it booted, before its crash record was written
// (the api killed just after a create took a spare: the replacement was
// booting), left its network namespace, veth, cgroups and disk, which no
// crash record names; the next supervisor on the state clears them by the
// spare's name.
func TestASpareKilledBeforeItsCrashRecordLeavesNothingAfterTheNextStart(t *testing.T) {
	state := filepath.Join(testRoot, "state-spare-mid-boot")
	cfg := Config{
		StateDir: state, Images: filepath.Join(testRoot, "images"),
		Network: Network{Bridge: "cbspare0", Gateway: netip.MustParsePrefix("10.206.0.1/16"), Ports: DefaultNetwork().Ports},
		Log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := spareIDPrefix + "0123456789ab"
	if err := os.MkdirAll(filepath.Join(state, "spares", id, "upper"), 0o700); err != nil {
		t.Fatal(err)
	}
	addr, _ := cfg.Network.addressAt(2)
	link, err := cfg.Network.plug(id, addr)
	if err != nil {
		t.Fatal(err)
	}
	cg, err := nspawn.MakeCgroups(cgroupName(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range append([]string{netnsPath(link.NetNS), "/sys/class/net/" + link.Veth, filepath.Join(state, "spares", id)}, cg.Dirs...) {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is left: %v", p, err)
		}
	}
}

// The pool boots no spare while a machine boots itself (a burst of
// creates, or an api's first create beside its pool's first boots, would
// share the cores with the refills).
func TestThePoolYieldsToAMachineBootingItself(t *testing.T) {
	s := &Supervisor{cfg: Config{Spares: 1}, spares: map[string][]*spare{}}
	if lack, yield := s.lacks(v2); !lack || yield {
		t.Fatalf("an empty pool, nothing booting: lack %v yield %v", lack, yield)
	}
	s.booting = 1
	if lack, yield := s.lacks(v2); !lack || !yield {
		t.Fatalf("an empty pool, a machine booting: lack %v yield %v", lack, yield)
	}
	s.spares[v2] = []*spare{{}}
	if lack, _ := s.lacks(v2); lack {
		t.Fatal("a full pool lacks a spare")
	}
}

// A tier whose newest image cannot boot as a spare neither stops the other
// tiers' spares nor is booted again at every wake of the pool: it is left
// alone for spareRetry (a broken base image here, beside the desk one).
func TestATierWhoseSpareCannotBootLeavesTheOtherTiersSpares(t *testing.T) {
	deskRoot := os.Getenv("COCOONBOX_DESK_IMAGE")
	if deskRoot == "" {
		t.Fatal("needs $COCOONBOX_DESK_IMAGE, the desk image's root (make box-test sets it)")
	}
	dir := filepath.Join(testRoot, "images-broken-base")
	t.Cleanup(func() { os.RemoveAll(dir) })
	broken := filepath.Join(dir, "cbdesk-v9-base")
	if err := os.MkdirAll(filepath.Join(broken, "etc/cocoonbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "etc/cocoonbox/image"), []byte("cbdesk:v9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deskRoot, filepath.Join(dir, "cbdesk-v1-desk")); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(testRoot, "state-broken-base")
	s, err := New(context.Background(), Config{
		StateDir: state, Images: dir,
		Network: Network{Bridge: "cbspare0", Gateway: netip.MustParsePrefix("10.206.0.1/16"), Ports: DefaultNetwork().Ports},
		Spares:  1,
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		os.RemoveAll(state)
	})
	pooled(t, s, "cbdesk:v1-desk", nil)
	if !s.backingOff("cbdesk:v9-base") || s.SparesOf("cbdesk:v9-base") != 0 {
		t.Fatal("the broken image is not left alone after its spare failed")
	}
	if s.backingOff("cbdesk:v1-desk") {
		t.Fatal("the desk image is left alone")
	}
}

// A boot cancelled as soon as nspawn's command started (a spare's when a
// machine starts to boot itself, or any at Close) leaves no process
// behind: its undo came before the join shell had entered the box's
// cgroups, cgroup.kill missed it, and it could go on to exec nspawn and
// boot a box no one knew (four were found on a test host). The undo now
// kills the command's process group and reaps it before start answers;
// each try's processes are then looked for by its machine name (nspawn's
// clone carries the same command line for its last moments).
// Not parallel: afterNspawnStart is the package's.
func TestABootCancelledAtOnceLeavesNoProcess(t *testing.T) {
	t.Cleanup(func() { afterNspawnStart.Store(nil) })
	for i := range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		pid := 0
		// Stopped where it is, most likely before it joined the cgroups
		// (cgroup.kill then misses it), which only a kill of its process
		// group ends.
		hook := func(p int) { pid = p; _ = unix.Kill(p, unix.SIGSTOP); cancel() }
		afterNspawnStart.Store(&hook)
		id := newID("cancelled")
		m := &machine{record: record{ID: id, Image: v1, Created: time.Now().UTC()}, dir: filepath.Join(testRoot, "cancelled-"+id)}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := sup.start(ctx, m, nil); err == nil {
			t.Fatalf("try %d: a boot whose context was cancelled answered running", i)
		}
		// Killed and reaped before start answers: undone, not left to
		// end (or to join the cgroups and boot) by itself.
		if pid == 0 {
			t.Fatalf("try %d: nspawn's command never started", i)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			t.Fatalf("try %d: the cancelled boot's process %d outlived start", i, pid)
		}
		var left []int
		_ = wait.Until(2*time.Minute, "the cancelled boot's processes gone", func() (bool, string) {
			left = processesNaming("--machine=" + id)
			return len(left) == 0, fmt.Sprint(left)
		})
		if len(left) > 0 {
			for _, pid := range left {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			// and the box it may have begun
			if cg, err := nspawn.MakeCgroups(cgroupName(id)); err == nil {
				clearCgroups(cg)
			}
			t.Fatalf("try %d: the cancelled boot left processes %v", i, left)
		}
		os.RemoveAll(m.dir)
	}
}

// processesNaming answers the pids whose command line holds arg.
func processesNaming(arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}
