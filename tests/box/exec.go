package box

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/internal/nspawn"
)

// Cmd is one command to run inside a box.
type Cmd struct {
	// Args is the program and its arguments (not a shell line).
	Args []string
	// User runs it as that user (runuser -u); empty is root.
	User string
	// Login runs it through a login shell of User (runuser -l), so
	// /etc/profile.d is read; Args are joined as one shell command line.
	Login bool
	// Stdin feeds the command; nil is empty input.
	Stdin io.Reader
	// Timeout bounds it; zero is 2 minutes.
	Timeout time.Duration
}

// Result is what a command printed and how it ended.
type Result struct {
	Stdout, Stderr string
	// ExitCode is the command's exit status; -1 when it did not exit by
	// itself (killed at the timeout, or not started).
	ExitCode int
}

// boxEnv is the environment a command starts with inside the box: nothing
// of the host's leaks in.
var boxEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root", "LANG=C.UTF-8", "TERM=dumb", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
}

// Door is a way into a box that this package did not boot: it runs c
// there as Exec would (root when c.User is empty, c.Timeout or 2 minutes),
// with Exec's errors.
type Door func(c Cmd) (Result, error)

// Attach answers a Box that someone else booted and runs (the api, through
// its supervisor), reached through door (`cocoonbox rsh`, say): every
// method that runs a command works on it; Stop, Reboot and Leader do not
// apply (Leader is 0, Stop does nothing).
func Attach(name string, door Door) *Box {
	return &Box{Name: name, door: door}
}

// Exec runs c inside the box (every namespace of its PID 1, or through
// the door of an attached box). The error is non-nil only when the command
// could not be run or timed out; a non-zero exit is in Result.ExitCode.
func (b *Box) Exec(c Cmd) (Result, error) {
	if b.door != nil {
		return b.door(c)
	}
	if b.leader == 0 {
		return Result{ExitCode: -1}, fmt.Errorf("box %s is not running", b.Name)
	}
	args := c.Args
	switch {
	case c.User != "" && c.Login:
		args = []string{"runuser", "-l", c.User, "-c", strings.Join(c.Args, " ")}
	case c.User != "":
		args = append([]string{"runuser", "-u", c.User, "--"}, c.Args...)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := nspawn.EnterCommand(ctx, b.leader, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "env", append(append([]string{"-i"}, boxEnv...), args...)...)
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%q in box %s: %w", strings.Join(args, " "), b.Name, err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, c.Stdin
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1}
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("%q in box %s: timed out after %v", strings.Join(args, " "), b.Name, timeout)
	}
	if res.ExitCode < 0 {
		return res, fmt.Errorf("%q in box %s: %w", strings.Join(args, " "), b.Name, err)
	}
	return res, nil
}

// Run runs a program as root and returns its stdout; a non-zero exit is an
// error that carries the exit code and stderr.
func (b *Box) Run(args ...string) (string, error) {
	return b.run(Cmd{Args: args})
}

// RunAs is Run as the named user.
func (b *Box) RunAs(user string, args ...string) (string, error) {
	return b.run(Cmd{Args: args, User: user})
}

// Sh runs a shell command line as root and returns its stdout.
func (b *Box) Sh(line string) (string, error) {
	return b.run(Cmd{Args: []string{"sh", "-c", line}})
}

func (b *Box) run(c Cmd) (string, error) {
	res, err := b.Exec(c)
	if err != nil {
		return res.Stdout, err
	}
	if res.ExitCode != 0 {
		return res.Stdout, fmt.Errorf("%q in box %s exited %d: %s",
			strings.Join(c.Args, " "), b.Name, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return res.Stdout, nil
}

// WriteFile writes data to path inside the box with the given mode and
// owner ("root", "user", "user:group"), through the box's own tools, so the
// box's idea of names and its mount namespace apply. The write is atomic
// for readers in the box: a temporary file in the same directory, renamed.
func (b *Box) WriteFile(path string, data []byte, mode os.FileMode, owner string) error {
	script := `set -e; t=$(mktemp "$(dirname "$1")/.cbtest.XXXXXX"); cat >"$t"; chmod "$2" "$t"; chown "$3" "$t"; mv -f "$t" "$1"`
	_, err := b.run(Cmd{
		Args:  []string{"sh", "-c", script, "sh", path, fmt.Sprintf("%o", mode.Perm()), owner},
		Stdin: bytes.NewReader(data),
	})
	return err
}

// CopyIn copies a host file into the box at path (mode and owner as for
// WriteFile).
func (b *Box) CopyIn(hostPath, path string, mode os.FileMode, owner string) error {
	data, err := os.ReadFile(hostPath)
	if err != nil {
		return err
	}
	return b.WriteFile(path, data, mode, owner)
}

// ReadFile reads a file inside the box.
func (b *Box) ReadFile(path string) ([]byte, error) {
	out, err := b.Run("cat", "--", path)
	return []byte(out), err
}

// Property answers a unit's property as `systemctl show -p NAME --value`
// prints it, "" when the call fails.
func (b *Box) Property(unit, name string) string {
	out, err := b.Run("systemctl", "show", "-p", name, "--value", unit)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
