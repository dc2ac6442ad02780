// Package box boots cbdesk image roots under systemd-nspawn, with real
// systemd as PID 1, and runs commands inside them. The booted-box tests and
// `make demo` use it; every promise of the guest contract is checked in such
// a box.
//
// The host has no systemd as PID 1, so a box is started with
// --register=no --keep-unit, and commands enter it with nsenter on the
// box's leader (its PID 1). Each box has its own machine name; several can
// run at once. They share the host's network, so apt inside reaches Debian's
// mirror and a listener on the box's 127.0.0.1 is reachable from the host.
package box

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/nspawn"
)

// Options says which image to boot and how.
type Options struct {
	// Image is the image's root directory (out/images/cbdesk-vN-TIER).
	Image string
	// Name is the machine name; empty gives "cbtest-" and 8 random hex digits.
	Name string
	// Persistent, when set, is a directory that holds the box's own root: it
	// is copied from Image on the first start (nspawn --template) and
	// survives a Reboot. Empty boots a throwaway root (--volatile=overlay:
	// the image is the lower layer, a tmpfs the upper).
	Persistent string
	// Args are extra systemd-nspawn arguments.
	Args []string
}

// Box is one running box. Its methods may be called from several
// goroutines once Start has returned.
type Box struct {
	Name    string
	opts    Options
	cmd     *exec.Cmd
	cgroups nspawn.Cgroups
	exited  chan struct{}
	exitErr error
	leader  int
	door    Door // an attached box's way in (Attach)
	// Console is the path of the file that holds nspawn's and the box's
	// console output, for a post-mortem.
	Console string
	// Booted is how long the box took from nspawn's start to `running`.
	Booted time.Duration
}

// ErrCannotBoot reports a host where boxes cannot run at all (not root, no
// systemd-nspawn); tests skip on it and nothing else.
var ErrCannotBoot = errors.New("boxes cannot boot on this host")

// CanBoot says whether this host can boot boxes, and why not.
func CanBoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not running as root (systemd-nspawn needs root)", ErrCannotBoot)
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return fmt.Errorf("%w: systemd-nspawn is missing (Debian package systemd-container)", ErrCannotBoot)
	}
	return nil
}

// Start boots a box and waits until systemd reports it `running` (or
// `degraded`, which the caller sees through FailedUnits). It gives up after
// the context's deadline or 90 s, stopping the box.
func Start(ctx context.Context, opts Options) (*Box, error) {
	if err := CanBoot(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(opts.Image, "etc/cocoonbox/image")); err != nil {
		return nil, fmt.Errorf("image %s is not a built cbdesk image (run `make image`): %w", opts.Image, err)
	}
	if opts.Name == "" {
		opts.Name = "cbtest-" + randomHex(4)
	}
	b := &Box{Name: opts.Name, opts: opts}
	if err := b.launch(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Box) launch(ctx context.Context) error {
	args := []string{"--quiet", "--register=no", "--keep-unit", "--boot",
		"--machine=" + b.Name, "--console=read-only", "--link-journal=no"}
	if b.opts.Persistent != "" {
		args = append(args, "--directory="+b.opts.Persistent, "--template="+b.opts.Image)
	} else {
		args = append(args, "--directory="+b.opts.Image, "--volatile=overlay")
	}
	args = append(args, b.opts.Args...)
	console, err := os.CreateTemp("", "cocoonbox-"+b.Name+"-console-*.log")
	if err != nil {
		return err
	}
	b.Console = console.Name()
	if b.cgroups.Dirs == nil {
		if b.cgroups, err = nspawn.MakeCgroups("cocoonbox-" + b.Name); err != nil {
			console.Close()
			return err
		}
	}
	b.cmd = nspawn.JoinCommand(b.cgroups.Dirs, os.Environ(), "systemd-nspawn", args...)
	b.cmd.Stdout, b.cmd.Stderr = console, console
	// Its own process group, so a test binary's Ctrl-C does not reach it
	// before Stop does.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	start := time.Now()
	if err := b.cmd.Start(); err != nil {
		console.Close()
		return fmt.Errorf("start systemd-nspawn: %w", err)
	}
	b.exited = make(chan struct{})
	go func() {
		b.exitErr = b.cmd.Wait()
		console.Close()
		close(b.exited)
	}()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := b.waitRunning(ctx); err != nil {
		tail := nspawn.ConsoleTail(b.Console, 40)
		b.Stop()
		return fmt.Errorf("box %s did not boot: %w\nconsole:\n%s", b.Name, err, tail)
	}
	b.Booted = time.Since(start)
	return nil
}

// waitRunning finds the leader, then waits for systemd's verdict.
func (b *Box) waitRunning(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-b.exited:
			return fmt.Errorf("systemd-nspawn exited: %v", b.exitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for `running`: %w", ctx.Err())
		case <-tick.C:
		}
		if b.leader == 0 {
			b.leader = nspawn.Leader(b.cmd.Process.Pid)
			continue
		}
		out, _ := b.Run("systemctl", "is-system-running", "--wait")
		switch strings.TrimSpace(out) {
		case "running", "degraded":
			return nil
		}
	}
}

// Leader is the host PID of the box's PID 1, for `nsenter -t PID -a`.
func (b *Box) Leader() int { return b.leader }

// Root is the box's root directory as the host sees it (/proc/PID/root).
func (b *Box) Root() string { return fmt.Sprintf("/proc/%d/root", b.leader) }

// Stop powers the box off (nspawn turns SIGTERM into a clean halt), kills it
// after 20 s, and removes its console log unless keepLog. Safe to call twice.
func (b *Box) Stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.exited:
		b.cgroups.Remove()
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
	}
	b.cgroups.Remove()
}

// Reboot reboots a persistent box from inside (`systemctl reboot`) and
// boots it again from the same root, as systemd-nspawn@.service would on
// exit status 133.
func (b *Box) Reboot(ctx context.Context) error {
	if b.opts.Persistent == "" {
		return errors.New("reboot needs a persistent box: a throwaway root does not survive one")
	}
	_, _ = b.Run("systemctl", "reboot")
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		b.Stop()
		return errors.New("box did not go down within 60 s of systemctl reboot")
	}
	b.leader = 0
	b.cgroups.Remove()
	b.cgroups = nspawn.Cgroups{}
	return b.launch(ctx)
}

// Diagnostics returns what an admin would look at first: the units that
// failed and the whole journal of every machine id (journalctl -m), cut to
// its last maxLines lines.
func (b *Box) Diagnostics(maxLines int) string {
	var s strings.Builder
	failed, _ := b.Run("systemctl", "--failed", "--no-pager")
	fmt.Fprintf(&s, "=== box %s: systemctl --failed\n%s\n", b.Name, failed)
	journal, _ := b.Run("journalctl", "-m", "--no-pager", "-o", "short-precise")
	lines := strings.Split(journal, "\n")
	if len(lines) > maxLines {
		fmt.Fprintf(&s, "=== journalctl -m --no-pager (last %d of %d lines)\n", maxLines, len(lines))
		lines = lines[len(lines)-maxLines:]
	} else {
		fmt.Fprintf(&s, "=== journalctl -m --no-pager\n")
	}
	s.WriteString(strings.Join(lines, "\n"))
	return s.String()
}

// FailedUnits lists the units systemd counts as failed.
func (b *Box) FailedUnits() ([]string, error) {
	out, err := b.Run("systemctl", "list-units", "--failed", "--plain", "--no-legend", "--no-pager")
	if err != nil {
		return nil, err
	}
	var units []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units, nil
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

// ProcessRunning says whether a host process with that PID exists; the
// tests use it to prove a stopped box left nothing running.
func ProcessRunning(pid int) bool { return syscall.Kill(pid, 0) == nil }
