// Command packages keeps the user's Debian packages across new images and
// restores (Contract: Packages).
//
//	packages record      run by apt's DPkg::Post-Invoke hook as root after
//	                     every apt run: rewrites ~user/.config/cocoonbox/packages
//	                     as user. Always exits 0: an error is logged, apt goes on.
//	packages reconcile   run by cocoonbox-packages.service at every desktop
//	                     start: installs the listed packages this machine lacks.
//
// Exit codes of reconcile (package cli, docs/conventions.md's table): 0 nothing
// missing or all installed; 75 the dpkg lock stayed held past the lock
// timeout, or apt-get update failed (try again later: the unit retries);
// 1 a listed package failed to install, or the list is unsafe or
// unreadable (a retry will not fix it); 2 usage.
//
// Environment: COCOONBOX_PACKAGES_LOCK_TIMEOUT, how long reconcile waits
// for a held dpkg lock (seconds, or a Go duration such as "3s"; default
// 120 s). COCOONBOX_PACKAGES_NO_RECORD=1 makes record do nothing (the
// reconciler sets it for its own apt runs).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/packages"
)

// DesktopUser is the user whose packages are kept (Contract: Desktop user).
const DesktopUser = "user"

// LockTimeoutEnv names the variable that shortens or lengthens the lock
// wait (the unit sets the contract's 120 s; tests set a few seconds).
const LockTimeoutEnv = "COCOONBOX_PACKAGES_LOCK_TIMEOUT"

const usage = `usage: packages record | reconcile
       packages --help | --version

  record     after an apt run (apt's DPkg::Post-Invoke hook, as root): write the
             packages marked manual beyond /etc/cocoonbox/packages.baseline to
             ~user/.config/cocoonbox/packages, as user. Always exits 0.
  reconcile  install the listed packages this machine lacks (cocoonbox-packages.service).
             Exit 0 done, 75 dpkg lock held or apt-get update failed (try again
             later), 1 a package failed or the list is unsafe, 2 usage.

Environment:
  COCOONBOX_PACKAGES_LOCK_TIMEOUT  dpkg lock wait, seconds or a duration like 3s (default 120)
  COCOONBOX_PACKAGES_NO_RECORD=1   record does nothing (set by reconcile for its apt runs)

Refusals and failures go to the journal (journalctl -t cocoonbox-packages),
and to stderr too when run in a terminal.
`

func main() {
	cmd := cli.Command{Name: "packages", Usage: usage}
	rest, code, exit := cmd.Parse(nil, os.Args[1:])
	if exit {
		os.Exit(code)
	}
	if len(rest) != 1 {
		os.Exit(cmd.UsageError("one command is needed: record or reconcile (got %q)", rest))
	}
	switch rest[0] {
	case "record":
		record()
		os.Exit(cli.OK)
	case "reconcile":
		os.Exit(reconcile())
	}
	os.Exit(cmd.UsageError("unknown command %q (allowed: record, reconcile)", rest[0]))
}

// newLog is the helper's journal logger; the box id names the box in every
// entry once the identity is there.
func newLog() *journal.Logger {
	log := journal.New("cocoonbox-packages")
	log.TagBox()
	return log
}

func lookupHome() (packages.Home, error) {
	u, err := user.Lookup(DesktopUser)
	if err != nil {
		return packages.Home{}, fmt.Errorf("desktop user %q: %w", DesktopUser, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return packages.Home{}, fmt.Errorf("desktop user %q has non-numeric ids %s:%s", DesktopUser, u.Uid, u.Gid)
	}
	return packages.Home{Dir: u.HomeDir, UID: uid, GID: gid}, nil
}

// record never fails apt: every error is logged and it returns.
func record() {
	if os.Getenv(packages.NoRecordEnv) != "" {
		return
	}
	log := newLog()
	// An apt run while an image is built (a chroot, no booted systemd) is
	// the image's own: it must not leave a list in the image.
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		log.Send(journal.Info, packages.MsgNotBooted, "not recording: not a booted system (an image build?)")
		return
	}
	home, err := lookupHome()
	if err != nil {
		log.Send(journal.Err, packages.MsgRecordError, "not recording the package list: "+err.Error())
		return
	}
	log.Set("COCOONBOX_PATH", home.Path())
	manual, err := packages.Manual(packages.DpkgStatus, packages.ExtendedStates)
	if err != nil {
		log.Send(journal.Err, packages.MsgRecordError, "not recording the package list: "+err.Error())
		return
	}
	f, err := os.Open(packages.Baseline)
	if err != nil {
		log.Send(journal.Err, packages.MsgRecordError, "not recording the package list: no baseline: "+err.Error())
		return
	}
	base, err := packages.Parse(f)
	f.Close()
	if err != nil {
		log.Send(journal.Err, packages.MsgRecordError, "not recording the package list: baseline "+packages.Baseline+": "+err.Error())
		return
	}
	names := packages.Beyond(manual, base.Names)

	// From here on the process is the user: the list's directory is the
	// user's, and the kernel then refuses whatever the user could not do.
	if os.Geteuid() == 0 {
		if err := dropTo(home.UID, home.GID); err != nil {
			log.Send(journal.Err, packages.MsgRecordError, "not recording the package list: "+err.Error())
			return
		}
	}
	changed, replaced, err := home.WriteList(names)
	switch {
	case err != nil:
		log.Send(journal.Err, packages.MsgRecordError, "recording the package list failed: "+err.Error())
	case replaced != "":
		log.Send(journal.Warning, packages.MsgReplaced, fmt.Sprintf("recorded %d packages in %s, replacing %s that stood there (never followed)", len(names), home.Path(), replaced),
			"COCOONBOX_COUNT", fmt.Sprint(len(names)))
	case changed:
		log.Send(journal.Info, packages.MsgRecorded, fmt.Sprintf("recorded %d packages in %s", len(names), home.Path()),
			"COCOONBOX_COUNT", fmt.Sprint(len(names)))
	}
}

// dropTo makes every thread of the process uid:gid with no other groups
// (Go's syscall package applies set*id to all threads).
func dropTo(uid, gid int) error {
	if err := syscall.Setgroups([]int{gid}); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if os.Geteuid() != uid || os.Getegid() != gid {
		return fmt.Errorf("still uid %d gid %d after dropping to %d:%d", os.Geteuid(), os.Getegid(), uid, gid)
	}
	return nil
}

func lockTimeout() (time.Duration, error) {
	v := os.Getenv(LockTimeoutEnv)
	if v == "" {
		return 120 * time.Second, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%s=%q is not a lock timeout: allowed values are positive seconds (120) or a Go duration (90s, 2m)", LockTimeoutEnv, v)
}

func reconcile() int {
	log := newLog()
	timeout, err := lockTimeout()
	if err != nil {
		log.Send(journal.Err, packages.MsgListError, err.Error())
		if log.Echo == nil {
			fmt.Fprintln(os.Stderr, "packages:", err)
		}
		return cli.Usage
	}
	home, err := lookupHome()
	if err != nil {
		log.Send(journal.Err, packages.MsgListError, err.Error())
		return cli.Failed
	}
	log.Set("COCOONBOX_PATH", home.Path())
	f, err := home.OpenList()
	if errors.Is(err, os.ErrNotExist) {
		log.Send(journal.Info, packages.MsgNothing, "no package list ("+home.Path()+"): nothing to install", "COCOONBOX_LISTED", "0")
		return cli.OK
	}
	if err != nil {
		log.Send(journal.Err, packages.MsgListError, "the package list is not read: "+err.Error())
		return cli.Failed
	}
	list, err := packages.Parse(f)
	f.Close()
	if err != nil {
		log.Send(journal.Err, packages.MsgListError, home.Path()+": "+err.Error())
		return cli.Failed
	}
	for _, r := range list.Refused {
		log.Send(journal.Warning, packages.MsgRefused, home.Path()+": "+r.Error()+"; the other lines go on",
			"COCOONBOX_LINE", fmt.Sprint(r.Line))
	}
	rc := &packages.Reconciler{Log: log, LockTimeout: timeout, Output: os.Stdout}
	_, err = rc.Reconcile(context.Background(), list.Names)
	switch {
	case err == nil:
		return cli.OK
	case errors.Is(err, packages.ErrTryLater):
		log.Send(journal.Warning, packages.MsgDeferred, "reconcile deferred (exit 75): "+err.Error())
		return cli.TryLater
	default:
		log.Send(journal.Err, packages.MsgGaveUp, "reconcile failed: "+err.Error())
		return cli.Failed
	}
}
