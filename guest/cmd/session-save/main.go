// Command session-save saves the XFCE desktop session of the calling user:
// it checkpoints xfce4-session over D-Bus, waits (bounded) for the session
// file, and records whether Mousepad is open. The toolhost call
// desktop_save runs it as user; a quiesce runs it before closing Chrome.
//
// Contract: Desktop session save.
//
// Exit codes:
//
//	0   saved
//	2   bad usage
//	69  no xfce4-session on the session bus (the desktop is not running)
//	75  xfce4-session was busy, or the session file did not come within
//	    --timeout: try again later
//	1   any other failure
//
// On any failure the previous save and the Mousepad record stay as they
// were.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/desktop"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// MESSAGE_IDs, one per kind of event.
const (
	msgSaved  = "98d342a1130d4d45931a35a5e22a6262"
	msgFailed = "eec20c232e7b4aea998458f27232a414"
)

const (
	exitFailed      = 1
	exitUsage       = 2
	exitUnavailable = 69
	exitTempFail    = 75
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("session-save", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for xfce4-session's session file")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: session-save [--timeout 10s]

Saves the XFCE session of the calling user (run it as user, with the
session's DBUS_SESSION_BUS_ADDRESS or /run/user/UID/bus): checkpoints
xfce4-session over D-Bus (org.xfce.Session.Manager.Checkpoint), waits for
~/.cache/sessions/xfce4-session-HOST:DISPLAY (a link into
~/.local/state/xfce4-session), and records whether Mousepad is open.

Exit codes: 0 saved; 2 bad usage; 69 no xfce4-session on the session bus;
75 xfce4-session busy or no session file within --timeout (try again
later); 1 other failure. A failure leaves the previous save as it was.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if *showVersion {
		fmt.Println("session-save", version.Version)
		return 0
	}
	if fs.NArg() > 0 || *timeout <= 0 {
		fmt.Fprintf(os.Stderr, "session-save: takes no arguments and --timeout must be positive (got %q, %v)\n", fs.Args(), *timeout)
		return exitUsage
	}
	log := journal.New("cocoonbox-session-save")
	fail := func(code int, err error) int {
		fmt.Fprintf(os.Stderr, "session-save: %v\n", err)
		log.Send(journal.Err, msgFailed, "desktop session not saved: "+err.Error(), "COCOONBOX_EXIT", fmt.Sprint(code))
		return code
	}
	env, err := desktop.CurrentEnv()
	if err != nil {
		return fail(exitFailed, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := desktop.ConnectSessionBus(env.UID)
	if err != nil {
		return fail(exitUnavailable, fmt.Errorf("%w (%v)", desktop.ErrNoSessionManager, err))
	}
	defer conn.Close()
	// The save must land in the state layer: the link first (it moves a
	// stray real directory's files over), then the checkpoint.
	state, err := desktop.LinkCache(env.Home)
	if err != nil {
		return fail(exitFailed, err)
	}
	file := env.SessionFile()
	session, err := desktop.Checkpoint(ctx, conn, file, 20*time.Millisecond)
	switch {
	case errors.Is(err, desktop.ErrNoSessionManager):
		return fail(exitUnavailable, err)
	case errors.Is(err, desktop.ErrBusy), errors.Is(err, desktop.ErrNoSessionFile):
		return fail(exitTempFail, err)
	case err != nil:
		return fail(exitFailed, err)
	}
	mousepad := desktop.Running("/proc", "mousepad", env.UID)
	if err := desktop.RecordMousepad(state, mousepad); err != nil {
		return fail(exitFailed, fmt.Errorf("session saved to %s, but recording Mousepad failed: %w", file, err))
	}
	open := map[bool]string{true: "open", false: "closed"}[mousepad]
	took := time.Since(start)
	msg := fmt.Sprintf("saved %d clients (%s) to %s in %d ms; mousepad %s",
		len(session.Clients), strings.Join(session.Programs(), " "), file, took.Milliseconds(), open)
	fmt.Println(msg)
	log.Send(journal.Info, msgSaved, "desktop session "+msg, "COCOONBOX_PATH", file,
		"COCOONBOX_CLIENTS", fmt.Sprint(len(session.Clients)), "COCOONBOX_MOUSEPAD", open)
	return 0
}
