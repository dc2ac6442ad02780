// Command session-save saves the XFCE desktop session of the calling user:
// it checkpoints xfce4-session over D-Bus, waits (bounded) for the session
// file, and records whether Mousepad is open. The toolhost call
// desktop_save runs it as user; a quiesce runs it before closing Chrome.
//
// Contract: Desktop session save.
//
// Exit codes (package cli, docs/conventions.md's table):
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

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/desktop"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// MESSAGE_IDs, one per kind of event.
const (
	msgSaved  = "98d342a1130d4d45931a35a5e22a6262"
	msgFailed = "eec20c232e7b4aea998458f27232a414"
)

const usage = `usage: session-save [--timeout 10s]
       session-save --help | --version

Saves the XFCE session of the calling user (run it as user, with the
session's DBUS_SESSION_BUS_ADDRESS or /run/user/UID/bus): checkpoints
xfce4-session over D-Bus (org.xfce.Session.Manager.Checkpoint), waits for
~/.cache/sessions/xfce4-session-HOST:DISPLAY (a link into
~/.local/state/xfce4-session), and records whether Mousepad is open.

--timeout D  how long to wait for xfce4-session's session file (default 10s)

Exit codes: 0 saved; 2 usage; 69 no xfce4-session on the session bus;
75 xfce4-session busy or no session file within --timeout (try again
later); 1 other failure. A failure leaves the previous save as it was.
`

func main() { os.Exit(run()) }

func run() int {
	cmd := cli.Command{Name: "session-save", Usage: usage}
	fs := flag.NewFlagSet("session-save", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for xfce4-session's session file")
	rest, code, exit := cmd.Parse(fs, os.Args[1:])
	if exit {
		return code
	}
	if len(rest) > 0 {
		return cmd.UsageError("takes no arguments (got %q)", rest)
	}
	if *timeout <= 0 {
		return cmd.UsageError("--timeout must be positive (got %v)", *timeout)
	}
	log := journal.New("cocoonbox-session-save")
	log.TagBox()
	fail := func(code int, err error) int {
		if log.Echo == nil { // in a terminal the journal entry is echoed already
			fmt.Fprintf(os.Stderr, "session-save: %v\n", err)
		}
		log.Send(journal.Err, msgFailed, "desktop session not saved: "+err.Error(), "COCOONBOX_EXIT", fmt.Sprint(code))
		return code
	}
	env, err := desktop.CurrentEnv()
	if err != nil {
		return fail(cli.Failed, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	conn, err := desktop.ConnectSessionBus(env.UID)
	if err != nil {
		return fail(cli.Unavailable, fmt.Errorf("%w (%v)", desktop.ErrNoSessionManager, err))
	}
	defer conn.Close()
	// The save must land in the state layer: the link first (it moves a
	// stray real directory's files over), then the checkpoint.
	state, err := desktop.LinkCache(env.Home)
	if err != nil {
		return fail(cli.Failed, err)
	}
	file := env.SessionFile()
	session, err := desktop.Checkpoint(ctx, conn, file, 20*time.Millisecond)
	switch {
	case errors.Is(err, desktop.ErrNoSessionManager):
		return fail(cli.Unavailable, err)
	case errors.Is(err, desktop.ErrBusy), errors.Is(err, desktop.ErrNoSessionFile):
		return fail(cli.TryLater, err)
	case err != nil:
		return fail(cli.Failed, err)
	}
	mousepad := desktop.Running("/proc", "mousepad", env.UID)
	if err := desktop.RecordMousepad(state, mousepad); err != nil {
		return fail(cli.Failed, fmt.Errorf("session saved to %s, but recording Mousepad failed: %w", file, err))
	}
	open := map[bool]string{true: "open", false: "closed"}[mousepad]
	took := time.Since(start)
	msg := fmt.Sprintf("saved %d clients (%s) to %s in %d ms; mousepad %s",
		len(session.Clients), strings.Join(session.Programs(), " "), file, took.Milliseconds(), open)
	fmt.Println(msg)
	log.Send(journal.Info, msgSaved, "desktop session "+msg, "COCOONBOX_PATH", file,
		"COCOONBOX_CLIENTS", fmt.Sprint(len(session.Clients)), "COCOONBOX_MOUSEPAD", open)
	return cli.OK
}
