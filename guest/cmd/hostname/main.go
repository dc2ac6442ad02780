// Command hostname makes the box's hostname follow its identity
// (Contract: Box identity). cocoonbox-hostname.service runs `hostname
// --watch` from boot on: it applies the identity at start and after every
// change of /run/cocoonbox-identity/identity or its directory (package
// pathwatch says why resident; cocoonbox-hostname.path starts the service
// again on a change should it not run). Without --watch it applies the
// identity once. It reads the record through
// identity.Load (root's file in root's directory, no symlink, not group- or
// world-writable), maps the name to a hostname (identity.Hostname: '_' as
// '-', the box id for an empty name) and sets the static hostname
// (/etc/hostname) and the kernel hostname through systemd-hostnamed over
// D-Bus, or, where hostnamed cannot be reached, by an atomic write of
// /etc/hostname and sethostname(2). It then keeps one line of /etc/hosts,
// marked "# cocoonbox-hostname", resolving the name to 127.0.1.1, so sudo
// never warns that it cannot resolve the host.
//
// A refused file or name is logged (MESSAGE_ID hostname-refused) and the
// hostname stays as it was.
//
// Exit codes of a single run (package cli, docs/conventions.md's table; --watch logs each run's outcome and goes
// on; it exits 75 only when the watch fails):
//
//	0   done (also: no identity file yet, nothing to do)
//	2   usage
//	65  the record is invalid, or its name maps to no valid hostname
//	73  the identity directory or file is unsafe (symlink, owner, mode, type, size)
//	74  the hostname or /etc/hosts could not be set
//	75  (--watch) the watch on the identity's directory failed
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/pathwatch"
)

// MESSAGE_IDs of the helper's journal entries (catalog:
// /usr/lib/systemd/catalog/cocoonbox-identity.catalog).
const (
	msgSet        = "e0b601500b3d4870896d5094c0d12f6f"
	msgRefused    = "ef3dd4313cec4853a7a8718ac879c8cc"
	msgFailed     = "824369f3d4284f9bb7b6905e3bda0def" // the hostname or /etc/hosts could not be set
	msgUnchanged  = "927343fbd2fa4621862eb78c0957435f" // the hostname already is the identity's
	msgNoIdentity = "7c95fe5fbc0c4d078d0cd9a9399fca1f" // no identity yet: nothing to apply
	msgWatchEnded = "994ff884cbe14d3bb09a951a6b83f8da" // the watch failed: exit 75, systemd restarts us
)

const usage = `usage: hostname [--watch | --help | --version]

Sets the box's hostname from /run/cocoonbox-identity/identity: the name with
'_' as '-', or the box id when the name is empty. Sets the static hostname
(/etc/hostname, written atomically) and the kernel one (sethostname), and
the marked 127.0.1.1 line of /etc/hosts. A refused file or name is logged
to the journal and the hostname stays.

--watch  keep running: apply now, tell systemd it is ready, apply again on
         every change of the identity file or its directory (what
         cocoonbox-hostname.service runs).

exit codes: 0 done (or no identity yet); 2 usage; 65 invalid record or a
name that maps to no hostname; 73 unsafe identity directory or file;
74 the hostname or /etc/hosts could not be set; 75 (--watch) the watch failed.
`

// maxRounds bounds how often one run applies a record that changed while
// it was being applied.
const maxRounds = 5

func main() {
	cmd := cli.Command{Name: "hostname", Usage: usage}
	fs := flag.NewFlagSet("hostname", flag.ContinueOnError)
	watchFlag := fs.Bool("watch", false, "keep running and apply every change")
	rest, code, exit := cmd.Parse(fs, os.Args[1:])
	if exit {
		os.Exit(code)
	}
	if len(rest) != 0 {
		os.Exit(cmd.UsageError("takes no arguments (got %q)", rest))
	}
	log := journal.New("cocoonbox-hostname")
	if *watchFlag {
		os.Exit(watch(log))
	}
	os.Exit(run(log))
}

// watch applies the identity now, says READY=1, and again after every
// change of the identity file or its directory (a chmod or chown of either
// is a change too: the helper must refuse it at once). The run's outcome
// is logged by run; the watch goes on.
func watch(log *journal.Logger) int {
	ready := func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }
	// Without a stop descriptor Run returns only with an error.
	err := pathwatch.Run([]string{identity.Dir, identity.Path}, func() { run(log) }, ready, -1)
	log.Send(journal.Err, msgWatchEnded, fmt.Sprintf("cannot watch %s: %v", identity.Dir, err), "COCOONBOX_PATH", identity.Dir)
	return cli.TryLater
}

func run(log *journal.Logger) int {
	log.TagBox() // a refused or missing identity names no box, not the last one
	applied := ""
	for round := 0; round < maxRounds; round++ {
		id, err := identity.Load()
		if errors.Is(err, fs.ErrNotExist) && round == 0 {
			log.Send(journal.Info, msgNoIdentity, "no identity yet; the hostname stays", "COCOONBOX_PATH", identity.Path)
			return cli.OK
		}
		if err != nil {
			return refuse(log, err)
		}
		want, err := id.Hostname()
		if err != nil {
			return refuse(log, fmt.Errorf("%s: %w", identity.Path, err))
		}
		if want == applied {
			return cli.OK // stable: what is in the file is what we set
		}
		if code := apply(log, want); code != cli.OK {
			return code
		}
		applied = want
	}
	return cli.OK
}

func refuse(log *journal.Logger, err error) int {
	code := cli.IO
	switch {
	case errors.Is(err, identity.ErrInvalid):
		code = cli.Invalid
	case errors.Is(err, identity.ErrUnsafe):
		code = cli.Unsafe
	}
	log.Send(journal.Err, msgRefused, "identity refused, the hostname stays: "+err.Error(),
		"COCOONBOX_PATH", identity.Path, "COCOONBOX_REASON", err.Error())
	return code
}

// apply sets the hostnames and /etc/hosts to name and logs what changed.
func apply(log *journal.Logger, name string) int {
	oldKernel, oldStatic := current()
	changed := oldKernel != name || oldStatic != name
	if changed {
		if err := set(name); err != nil {
			log.Send(journal.Err, msgFailed, fmt.Sprintf("cannot set the hostname to %s: %v", name, err),
				"COCOONBOX_OLD_HOSTNAME", oldKernel, "COCOONBOX_NEW_HOSTNAME", name)
			return cli.IO
		}
	}
	hostsChanged, err := ensureHosts(hostsFile, name)
	if err != nil {
		log.Send(journal.Err, msgFailed, fmt.Sprintf("cannot update %s for %s: %v", hostsFile, name, err),
			"COCOONBOX_PATH", hostsFile, "COCOONBOX_NEW_HOSTNAME", name)
		return cli.IO
	}
	if !changed && !hostsChanged {
		log.Send(journal.Info, msgUnchanged, "hostname already "+name, "COCOONBOX_NEW_HOSTNAME", name)
		return cli.OK
	}
	log.Send(journal.Notice, msgSet, fmt.Sprintf("hostname %s → %s", oldKernel, name),
		"COCOONBOX_OLD_HOSTNAME", oldKernel, "COCOONBOX_OLD_STATIC_HOSTNAME", oldStatic,
		"COCOONBOX_NEW_HOSTNAME", name, "COCOONBOX_PATH", identity.Path)
	return cli.OK
}
