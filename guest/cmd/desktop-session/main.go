// Command desktop-session prepares and completes the XFCE session of the
// desktop user at each session start.
//
// Contract: Desktop session save.
//
//	desktop-session start      ExecStart= of cocoonbox-session.service, as
//	                           user: prepare, then hand the display to the
//	                           user manager's D-Bus-activated services
//	                           (dbus-update-activation-environment) and exec
//	                           xfce4-session. A failed prepare is logged and
//	                           the desktop starts anyway.
//	desktop-session prepare    links ~/.cache/sessions to
//	                           ~/.local/state/xfce4-session and adopts the
//	                           newest save under the current host name, so
//	                           xfce4-session restarts its clients after a
//	                           rename.
//	desktop-session end        ExecStopPost= of cocoonbox-session.service,
//	                           as root ('+'): ends every logind session the
//	                           unit opened and returns only when none of
//	                           their processes is left (desktop.EndSessions),
//	                           so the next start's window manager never meets
//	                           the old one.
//	desktop-session mousepad   from the autostart entry cocoonbox-mousepad:
//	                           starts Mousepad when the last save recorded it
//	                           open (its session-restore='always' reopens its
//	                           documents) and it is not running yet.
//
// Exit codes (package cli, docs/conventions.md's table): 0 done (also: nothing to
// adopt, Mousepad not to reopen, no session to end); 2 bad usage; 1 failure (logged;
// for end: a process of an old session still there after 15 s). start does not return once
// xfce4-session runs; it exits 1 only when it cannot exec it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/desktop"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// MESSAGE_IDs, one per kind of event.
const (
	msgAdopted  = "c63b6b4e36f04664a79080008368c62a" // the newest save copied under this host's name
	msgOwnSave  = "3d90c171fc184bdc8334290571a6aaab" // the newest save already is this host's
	msgNoSave   = "344bd5969d96453f80366413a34c7fa8"
	msgFailed   = "fe08587a26b5406aa5df8d4c904a37ce"
	msgMousepad = "b3ead248fd8249beac04e1e8e6414560"
	msgEnded    = "218ee97da4ce4801bc9c88dad9019013" // the old desktop sessions ended before the next start
	msgKilled   = "8d95ec99ba97489a867619ace5c7fdd1" // an old session's processes outlived SIGTERM and were killed
)

const (
	mousepadPath     = "/usr/bin/mousepad"
	xfce4SessionPath = "/usr/bin/xfce4-session"
)

// activationEnv is what the user manager's D-Bus-activated services (xfconfd,
// Thunar's daemon, ...) need to reach the desktop.
var activationEnv = []string{"DISPLAY", "XAUTHORITY", "XDG_CURRENT_DESKTOP",
	"XDG_SESSION_TYPE", "XDG_SESSION_DESKTOP", "DESKTOP_SESSION"}

// endGrace is how long an old session's processes have to go after
// logind's SIGTERM before they are killed; endTimeout bounds the whole
// end, inside the unit's TimeoutStopSec=20.
const (
	endGrace   = 5 * time.Second
	endTimeout = 15 * time.Second
)

const usage = `usage: desktop-session start|prepare|end|mousepad
       desktop-session --help | --version

  start     prepare, then exec xfce4-session (cocoonbox-session.service)
  prepare   link ~/.cache/sessions to ~/.local/state/xfce4-session and adopt
            the newest saved session under the current host name (run
            before xfce4-session, as the desktop user)
  end       end the desktop's logind sessions and wait until none of their
            processes is left (cocoonbox-session.service's ExecStopPost=,
            as root)
  mousepad  start Mousepad when the last session-save found it open

Exit codes: 0 done; 2 usage; 1 failure (logged to the journal, and to
stderr in a terminal).
`

// init pins the main goroutine to the process's main thread, so the
// syscall.Exec of xfce4-session (and Mousepad) runs there. With PAMName=,
// systemd forks the session's keeper "(sd-pam)" from that thread with
// PR_SET_PDEATHSIG=SIGTERM, and the kernel sends that signal when the
// creating *thread* ends. An execve from any other thread of the Go
// runtime ends the main thread: sd-pam got SIGTERM, closed the logind
// session, and logind (KillUserProcesses=yes) killed the new desktop right
// away; Restart= brought it back 2 s later (seen in about one start of five).
func init() { runtime.LockOSThread() }

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cmd := cli.Command{Name: "desktop-session", Usage: usage}
	rest, code, exit := cmd.Parse(nil, args)
	if exit {
		return code
	}
	if len(rest) != 1 {
		return cmd.UsageError("one command is needed: start, prepare, end or mousepad (got %q)", rest)
	}
	verb := rest[0]
	switch verb {
	case "start", "prepare", "end", "mousepad":
	default:
		return cmd.UsageError("unknown command %q (allowed: start, prepare, end, mousepad)", verb)
	}
	log := journal.New("cocoonbox-desktop-session")
	log.TagBox()
	fail := func(err error) int {
		if log.Echo == nil { // in a terminal the journal entry is echoed already
			fmt.Fprintf(os.Stderr, "desktop-session %s: %v\n", verb, err)
		}
		log.Send(journal.Err, msgFailed, fmt.Sprintf("desktop-session %s failed: %v", verb, err))
		return cli.Failed
	}
	switch verb {
	case "mousepad":
		return mousepad(log, fail)
	case "end":
		return end(log, fail)
	}
	code = prepare(log, fail)
	if verb == "prepare" {
		return code
	}
	// start: whatever prepare said (it is logged), the desktop starts. A
	// start that returned here would leave the unit failed once Restart=
	// hit the start limit, with no desktop at all (issue 18, item 1: a
	// regular file at ~/.cache/sessions did it).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	act := exec.CommandContext(ctx, "dbus-update-activation-environment", append([]string{"--systemd"}, activationEnv...)...)
	if out, err := act.CombinedOutput(); err != nil {
		// The desktop still works; only D-Bus-activated apps lack the display.
		fail(fmt.Errorf("dbus-update-activation-environment: %v: %s", err, out))
	}
	if err := syscall.Exec(xfce4SessionPath, []string{"xfce4-session"}, os.Environ()); err != nil {
		return fail(fmt.Errorf("exec %s: %w", xfce4SessionPath, err))
	}
	return cli.OK
}

// end ends the desktop's logind sessions (desktop.EndSessions) and logs
// what it ended; what had to be killed is a warning.
func end(log *journal.Logger, fail func(error) int) int {
	ctx, cancel := context.WithTimeout(context.Background(), endTimeout)
	defer cancel()
	start := time.Now()
	ended, err := desktop.EndSessions(ctx, endGrace)
	if err != nil {
		return fail(err)
	}
	for _, e := range ended {
		if e.Killed {
			log.Send(journal.Warning, msgKilled, fmt.Sprintf("processes of the old desktop session %s outlived SIGTERM by %s and were killed", e.ID, endGrace),
				"COCOONBOX_SESSION", e.ID, "COCOONBOX_UNIT", e.Scope)
		}
	}
	if len(ended) > 0 {
		log.Send(journal.Info, msgEnded, fmt.Sprintf("ended %d old desktop session(s) in %d ms: none of their processes is left", len(ended), time.Since(start).Milliseconds()),
			"COCOONBOX_SESSIONS", fmt.Sprint(len(ended)))
	}
	return cli.OK
}

// mousepad starts Mousepad when the last save found it open and it is not
// running yet.
func mousepad(log *journal.Logger, fail func(error) int) int {
	env, state, err := sessionState()
	if err != nil {
		return fail(err)
	}
	open, err := desktop.MousepadWasOpen(state)
	if err != nil {
		return fail(err)
	}
	if !open || desktop.Running("/proc", "mousepad", env.UID) {
		return cli.OK
	}
	log.Send(journal.Info, msgMousepad, "reopening Mousepad, open at the last session save")
	if err := syscall.Exec(mousepadPath, []string{"mousepad"}, os.Environ()); err != nil {
		return fail(fmt.Errorf("exec %s: %w", mousepadPath, err))
	}
	return cli.OK
}

// prepare links the session cache into the state directory and adopts the
// newest save under the current host name; see LinkCache and Adopt. A
// failure is logged through fail, whose code it returns.
func prepare(log *journal.Logger, fail func(error) int) int {
	env, state, err := sessionState()
	if err != nil {
		return fail(err)
	}
	a, err := desktop.Adopt(state, env.Host, env.Display)
	switch {
	case errors.Is(err, desktop.ErrNoSave):
		log.Send(journal.Info, msgNoSave, "no saved desktop session yet: xfce4-session starts the default one",
			"COCOONBOX_PATH", state)
	case err != nil:
		return fail(err)
	case a.Copied:
		log.Send(journal.Notice, msgAdopted, fmt.Sprintf("adopted the newest desktop session %s as %s (host name %s)", a.From, a.To, env.Host),
			"COCOONBOX_PATH", a.To, "COCOONBOX_FROM", a.From)
	default:
		log.Send(journal.Info, msgOwnSave, fmt.Sprintf("the newest desktop session %s is already this host's", a.To),
			"COCOONBOX_PATH", a.To)
	}
	return cli.OK
}

// sessionState is the calling user's environment and the xfce4-session
// state directory, the session cache linked into it first: both steps
// read the saves there, and a cache left a real directory would hide them.
func sessionState() (desktop.Env, string, error) {
	env, err := desktop.CurrentEnv()
	if err != nil {
		return desktop.Env{}, "", err
	}
	state, err := desktop.LinkCache(env.Home)
	return env, state, err
}
