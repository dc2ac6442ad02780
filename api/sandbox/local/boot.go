package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/internal/nspawn"
	"github.com/cocoonbox/cocoonbox/internal/steps"
	"golang.org/x/sys/unix"
)

// egressFiles are bound read-only into every box, so every way a program
// starts there knows the proxy: systemd's services (DefaultEnvironment),
// the user manager's (environment.d), login shells (profile.d) and apt run
// from anything (its own setting), and the pool CA the proxy intercepts
// with, which the same variables point the runtimes at (caFiles, caVars;
// root is the image's root). The box cannot change them.
func (s *Supervisor) egressFiles(root string) (map[string]string, error) {
	u := s.ProxyURL()
	vars := fmt.Sprintf("HTTP_PROXY=%[1]s HTTPS_PROXY=%[1]s http_proxy=%[1]s https_proxy=%[1]s NO_PROXY=localhost,127.0.0.1 no_proxy=localhost,127.0.0.1 ", u) + caVars()
	lines := strings.ReplaceAll(vars, " ", "\n") + "\n"
	var profile strings.Builder
	for _, kv := range strings.Fields(vars) {
		profile.WriteString("export " + kv + "\n")
	}
	files, err := s.caFiles(root)
	if err != nil {
		return nil, err
	}
	files["/etc/systemd/system.conf.d/50-cocoonbox-egress.conf"] = "[Manager]\nDefaultEnvironment=" + vars + "\n"
	files["/etc/environment.d/50-cocoonbox-egress.conf"] = lines
	files["/etc/profile.d/cocoonbox-egress.sh"] = profile.String()
	files["/etc/apt/apt.conf.d/80cocoonbox-egress"] = fmt.Sprintf("Acquire::http::Proxy %q;\nAcquire::https::Proxy %q;\n", u, u)
	return files, nil
}

// crashRecord is what the run directory keeps of a booted machine, so the
// next supervisor on the bridge can clear it after a crash.
type crashRecord struct {
	ID      string   `json:"id"`
	NSpawn  int      `json:"nspawn"`
	Root    string   `json:"root"`
	Link    boxLink  `json:"link"`
	Cgroups []string `json:"cgroups"`
	Unified string   `json:"unified"`
}

// boot brings a stopped machine up: a spare's boot taken over when one
// fits (takeSpare), or network, disk, cgroups, nspawn, waiting for
// systemd's verdict; as soon as the box's init runs, beside that wait, it
// renders the claim env and runs first (early). The caller holds m.op.
func (s *Supervisor) boot(ctx context.Context, m *machine, first []sandbox.Command) error {
	took, err := s.takeSpare(ctx, m, first)
	if took || err != nil {
		return err
	}
	s.mu.Lock()
	s.booting++
	s.yieldSpare()
	s.mu.Unlock()
	r, err := s.start(ctx, m, first)
	s.mu.Lock()
	s.booting--
	s.mu.Unlock()
	s.kickSpares() // the pool waited for this boot
	if err != nil {
		return err
	}
	s.adopt(m, r)
	return nil
}

// adopt makes r m's running host side and watches it.
func (s *Supervisor) adopt(m *machine, r *running) {
	m.mu.Lock()
	m.run = r
	m.booted = time.Now().UTC()
	m.mu.Unlock()
	go s.watchExit(m, r)
}

// start boots m's disk and answers its running host side once the box's
// systemd has finished its boot and early has run; a failure leaves
// nothing behind. It neither records the result in m nor watches it (boot
// and the spares do).
func (s *Supervisor) start(ctx context.Context, m *machine, first []sandbox.Command) (*running, error) {
	root, err := s.imageRoot(m.Image)
	if err != nil {
		return nil, err
	}
	r := &running{name: m.ID}
	undo := func() { s.teardown(m, r) }
	netted := steps.Begin(ctx, "boot.net")
	if r.addrOff, err = s.leaseAddress(m.ID); err != nil {
		return nil, err
	}
	addr, _ := s.cfg.Network.addressAt(r.addrOff)
	if r.link, err = s.cfg.Network.plug(m.ID, addr); err != nil {
		undo()
		return nil, err
	}
	netted()
	mounted := steps.Begin(ctx, "boot.root")
	if r.uids, err = leaseUIDRange(); err != nil {
		undo()
		return nil, err
	}
	if err := mountRoot(m.dir, root, r.uids); err != nil {
		undo()
		return nil, err
	}
	mounted()
	prepared := steps.Begin(ctx, "boot.prepare")
	mid, chosen, err := bootMachineID(filepath.Join(m.dir, "root"))
	if err != nil {
		undo()
		return nil, err
	}
	r.machineID = mid
	if r.cg, err = nspawn.MakeCgroups(cgroupName(m.ID)); err != nil {
		undo()
		return nil, err
	}
	if r.cg.Unified == "" {
		undo()
		return nil, errors.New("no cgroup2 hierarchy: hibernation needs cgroup.freeze")
	}
	egressDir := filepath.Join(m.dir, "egress")
	if err := os.MkdirAll(egressDir, 0o755); err != nil {
		undo()
		return nil, err
	}
	args := []string{"--quiet", "--register=no", "--keep-unit", "--boot", "--notify-ready=yes",
		"--machine=" + m.ID, "--directory=" + filepath.Join(m.dir, "root"),
		"--console=read-only", "--link-journal=no"}
	if chosen {
		args = append(args, "--uuid="+mid)
	}
	args = append(args, r.uids.nspawnArgs()...)
	files, err := s.egressFiles(root)
	if err != nil {
		undo()
		return nil, err
	}
	points := make([]string, 0, len(files))
	for path := range files {
		points = append(points, path)
	}
	if err := makeMountPoints(filepath.Join(m.dir, "root"), r.uids.Base, points); err != nil {
		undo()
		return nil, err
	}
	for path, body := range files {
		host := filepath.Join(egressDir, strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"))
		if err := os.WriteFile(host, []byte(body), 0o644); err != nil {
			undo()
			return nil, err
		}
		args = append(args, "--bind-ro="+host+":"+path)
	}
	console, err := os.Create(filepath.Join(m.dir, "console.log"))
	if err != nil {
		undo()
		return nil, err
	}
	ready, err := listenReady(m.ID)
	if err != nil {
		console.Close()
		undo()
		return nil, err
	}
	defer ready.Close()
	prepared()
	if err := ctx.Err(); err != nil {
		// A spare's boot stopped for a machine booting itself, or Close:
		// no nspawn to start and kill.
		console.Close()
		undo()
		return nil, err
	}
	started := steps.Begin(ctx, "boot.nspawn")
	// nspawn starts in the box's network namespace rather than joining it
	// (--network-namespace-path): its child joins it from inside the box's
	// user namespace, which holds no right over a namespace the host made
	// (EPERM); the box inherits it, and its root cannot change it.
	args = append([]string{"--net=" + netnsPath(r.link.NetNS), "--", "systemd-nspawn"}, args...)
	cmd := nspawn.JoinCommand(r.cg.Dirs, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "NOTIFY_SOCKET=" + ready.name}, "nsenter", args...)
	cmd.Stdout, cmd.Stderr = console, console
	// Its own process group: a signal to the supervisor's group does not
	// reach the box before Delete or Close does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		console.Close()
		undo()
		return nil, fmt.Errorf("start systemd-nspawn: %w", err)
	}
	r.nspawn = cmd
	if f := afterNspawnStart.Load(); f != nil {
		(*f)(cmd.Process.Pid)
	}
	go ready.serve(cmd.Process.Pid)
	r.exited = make(chan struct{})
	go func() {
		r.exitErr = cmd.Wait()
		console.Close()
		close(r.exited)
	}()
	// From here the undo kills the process group too, and waits for it: a
	// boot cancelled at once (a spare's, for a machine booting itself, or
	// at Close) could undo before the join shell had entered the cgroups,
	// and cgroup.kill missed it: it joined, became nspawn and booted a box
	// no one knew (four on a test host).
	undo = func() {
		select {
		case <-r.exited: // reaped: the group id may be another's by now
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		r.cg.Kill()
		<-r.exited
		s.teardown(m, r)
	}
	if err := s.writeCrashRecord(crashRecord{ID: m.ID, NSpawn: cmd.Process.Pid, Root: filepath.Join(m.dir, "root"), Link: r.link, Cgroups: r.cg.Dirs, Unified: r.cg.Unified}); err != nil {
		undo()
		return nil, err
	}
	started()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BootTimeout)
	defer cancel()
	if err := s.waitRunning(ctx, r, ready.ready, func(ctx context.Context) error { return s.early(ctx, m, r, first) }); err != nil {
		tail := nspawn.ConsoleTail(filepath.Join(m.dir, "console.log"), 30)
		undo()
		return nil, fmt.Errorf("machine %s did not boot: %w\nconsole:\n%s", m.ID, err, tail)
	}
	return r, nil
}

// afterNspawnStart, when a test sets it, is called with the pid of
// nspawn's command (the join shell, then nspawn) as soon as it has
// started (TestABootCancelledAtOnceLeavesNoProcess cancels the boot
// there).
var afterNspawnStart atomic.Pointer[func(pid int)]

// early is what boot does through the box's door as soon as its init
// runs: the claim env into /run/silkd.env (so the vault's first render
// has it), then each of first's commands. (Beside each other they were
// slower on a spare: two nsenters at once on two cores.)
func (s *Supervisor) early(ctx context.Context, m *machine, r *running, first []sandbox.Command) error {
	d := r.door
	rendered := steps.Begin(ctx, "boot.claimenv")
	if err := s.renderClaimEnv(ctx, m, r); err != nil {
		return err
	}
	rendered()
	defer steps.Begin(ctx, "boot.first")()
	for i, c := range first {
		if _, _, err := runIn(ctx, d, sandbox.ExecRequest{Args: c.Args}, bytes.NewReader(c.Stdin)); err != nil {
			return fmt.Errorf("first command %d: %w", i, err)
		}
	}
	return nil
}

// waitRunning finds the box's PID 1 (and with it r's door), then runs early
// while it waits for systemd's verdict (ready closed: the box's systemd
// finished its boot, running or degraded); it answers once both are done,
// or at once with early's error.
func (s *Supervisor) waitRunning(ctx context.Context, r *running, ready <-chan struct{}, early func(context.Context) error) error {
	leader := steps.Begin(ctx, "boot.leader")
	for r.leader == 0 {
		select {
		case <-r.exited:
			return fmt.Errorf("systemd-nspawn exited: %v", r.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for running: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
		if r.leader = nspawn.Leader(r.nspawn.Process.Pid); r.leader != 0 {
			r.door = &unitDoor{leader: r.leader, base: r.uids.Base, netns: netnsPath(r.link.NetNS)}
		}
	}
	leader()
	systemd := steps.Begin(ctx, "boot.systemd")
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	earlyDone := make(chan error, 1)
	go func() { earlyDone <- early(ectx) }()
	booted := false
	for {
		select {
		case <-ready:
			systemd()
			booted, ready = true, nil
		case err := <-earlyDone:
			if err != nil {
				return err
			}
			earlyDone = nil
		case <-r.exited:
			return fmt.Errorf("systemd-nspawn exited: %v", r.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for running: %w", ctx.Err())
		}
		if booted && earlyDone == nil {
			return nil
		}
	}
}

// watchExit notices a machine that went down by itself (a poweroff inside,
// a crash) and clears its host side.
func (s *Supervisor) watchExit(m *machine, r *running) {
	<-r.exited
	m.mu.Lock()
	stopping := r.stopping
	m.mu.Unlock()
	if stopping {
		return
	}
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	current := m.run == r
	m.mu.Unlock()
	if !current {
		return
	}
	s.teardown(m, r)
	s.setState(m, sandbox.Stopped, fmt.Sprintf("went down by itself: %v", r.exitErr))
}

// stop powers a booted machine off (nspawn turns SIGTERM into a clean
// halt), kills what is left after 20 s, and clears its host side. The
// caller holds m.op.
func (s *Supervisor) stop(m *machine) {
	m.mu.Lock()
	r := m.run
	if r != nil {
		r.stopping = true
	}
	m.mu.Unlock()
	if r == nil {
		return
	}
	// A frozen box cannot halt.
	_ = r.cg.SetFrozen(context.Background(), false)
	_ = r.nspawn.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-r.nspawn.Process.Pid, syscall.SIGKILL)
		r.cg.Kill()
		<-r.exited
	}
	s.teardown(m, r)
}

// kill ends a booted machine at once, frozen or not (cgroup.kill on its
// whole tree, nspawn included), and clears its host side: for a machine
// whose disk goes next. The caller holds m.op.
func (s *Supervisor) kill(m *machine) {
	m.mu.Lock()
	r := m.run
	if r != nil {
		r.stopping = true
	}
	m.mu.Unlock()
	if r == nil {
		return
	}
	_ = syscall.Kill(-r.nspawn.Process.Pid, syscall.SIGKILL)
	r.cg.Kill()
	<-r.exited
	s.teardown(m, r)
}

// teardown clears a machine's host side; each step tolerates what an
// earlier failure left undone.
func (s *Supervisor) teardown(m *machine, r *running) {
	// Killed and emptied before the removal, which gives up after a
	// second: a spare's name never comes back to clear what is left.
	if d, ok := r.door.(*unitDoor); ok {
		d.close()
	}
	clearCgroups(r.cg)
	clearNspawnRun(r.name, filepath.Join(m.dir, "root"))
	_ = unmountRoot(m.dir)
	s.cfg.Network.unplug(r.link)
	if r.addrOff != 0 {
		s.releaseAddress(r.addrOff)
	}
	r.uids.release()
	_ = os.Remove(filepath.Join(s.runDir, m.ID+".json"))
	m.mu.Lock()
	if m.run == r {
		m.run = nil
	}
	m.mu.Unlock()
}

// clearNspawnRun removes what systemd-nspawn keeps under /run for machine
// name booted on root: its mount propagation directory and its lock on the
// root's inode. nspawn removes them when it ends cleanly, but a killed one
// (Delete, a dropped spare) leaves them, and a spare's name never comes
// back: thousands piled up on a test host.
func clearNspawnRun(name, root string) {
	if name != "" {
		_ = os.RemoveAll(filepath.Join("/run/systemd/nspawn/propagate", name))
	}
	var st unix.Stat_t
	if unix.Stat(root, &st) == nil {
		_ = os.Remove(fmt.Sprintf("/run/systemd/nspawn/locks/inode-%d:%d", st.Dev, st.Ino))
	}
}

func (s *Supervisor) writeCrashRecord(c crashRecord) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.runDir, c.ID+".json"), data, 0o600)
}

// clearLeftovers ends what a crashed supervisor on this bridge left:
// nspawn and its box, the root mount, the namespace and veth, the cgroups.
func (s *Supervisor) clearLeftovers() {
	entries, _ := os.ReadDir(s.runDir)
	for _, e := range entries {
		p := filepath.Join(s.runDir, e.Name())
		data, err := os.ReadFile(p)
		var c crashRecord
		if err != nil || json.Unmarshal(data, &c) != nil {
			os.Remove(p)
			continue
		}
		s.cfg.Log.Warn("clearing a machine a previous supervisor left booted", "machine", c.ID)
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.NSpawn)); strings.TrimSpace(string(comm)) == "systemd-nspawn" {
			_ = syscall.Kill(c.NSpawn, syscall.SIGKILL)
		}
		clearCgroups(nspawn.Cgroups{Dirs: c.Cgroups, Unified: c.Unified})
		_ = unix.Unmount(c.Root, unix.MNT_DETACH)
		s.cfg.Network.unplug(c.Link)
		os.Remove(p)
	}
}

// clearCgroups ends what a leftover machine's cgroups hold and removes
// them.
func clearCgroups(cg nspawn.Cgroups) {
	if cg.Unified != "" {
		// A frozen leftover would hold cgroup.kill's victims until thawed.
		_ = os.WriteFile(filepath.Join(cg.Unified, "payload", "cgroup.freeze"), []byte("0"), 0o644)
		cg.Kill()
		deadline := time.Now().Add(10 * time.Second)
		for !cg.Empty() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cg.Remove()
}

// runIn runs a short command through a door and returns its stdout and
// exit status; stdin may be nil.
func runIn(ctx context.Context, d Door, req sandbox.ExecRequest, stdin io.Reader) (string, sandbox.ExitStatus, error) {
	p, err := d.Start(ctx, req)
	if err != nil {
		return "", sandbox.ExitStatus{}, err
	}
	go func() {
		if stdin != nil {
			_, _ = io.Copy(p.Stdin(), stdin)
		}
		p.Stdin().Close()
	}()
	var out, errOut strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&errOut, p.Stderr()); close(done) }()
	_, _ = io.Copy(&out, p.Stdout())
	<-done
	st, err := p.Wait()
	if err == nil && st.Code != 0 {
		err = fmt.Errorf("%q exited %d: %s", strings.Join(req.Args, " "), st.Code, strings.TrimSpace(errOut.String()))
	}
	return out.String(), st, err
}

// cgroupName is the name of machine id's cgroups under the supervisor's
// own, in each hierarchy.
func cgroupName(id string) string { return "cbsbx-" + id }
