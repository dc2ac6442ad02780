// Command machine-id makes journald follow the box's machine id (Contract:
// Journal): every clone and every wake gets a new /etc/machine-id, and
// journald reads the id once, at its start, so it must be restarted to
// write under /var/log/journal/<new id>. cocoonbox-machine-id.service runs
// `machine-id --watch` from boot on: it notes the id at its start (the one
// journald started with), and after every change of /etc/machine-id that
// leaves a new valid id there, restarts systemd-journald.service
// (systemctl restart: a journald that is down comes up under the new id
// too). Resident on package pathwatch, like the hostname and the vault: a
// path unit starting one run per change missed an id written while its
// run restarted journald, which then stayed under the id before it.
//
// Without --watch it restarts journald once when the id differs from
// --since (for an admin).
//
// Exit codes (package cli, docs/conventions.md's table): 0 done; 2 usage; 65 the
// file holds no valid machine id (32 lower-case hex digits; empty is "not
// yet", not an error); 74 journald could not be restarted; 75 (--watch) the
// watch failed, systemd starts the service again.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/pathwatch"
)

// MESSAGE_IDs (catalog: /usr/lib/systemd/catalog/cocoonbox-identity.catalog).
const (
	msgRestarted  = "0f09b4b77dc74d89998f8df597479bfa" // journald restarted under a new id
	msgBadID      = "08a2d360079241dda74ac6b20bd14891" // the file holds no valid id: nothing done
	msgRestartErr = "11c4e101689342aab60f810a952b3963" // journald could not be restarted
	msgWatchEnded = "accc0dd87c804950883ffb126a635c8c" // the watch failed: exit 75
)

const machineIDPath = "/etc/machine-id"

const usage = `usage: machine-id --watch
       machine-id --since ID
       machine-id --help | --version

Restarts systemd-journald when /etc/machine-id holds a new id, so the
journal of this wake or clone goes to /var/log/journal/<new id>
(journalctl -m shows the history across ids).

--watch     keep running (cocoonbox-machine-id.service): note the id now,
            tell systemd it is ready, restart journald after every change
            of the file to a new valid id
--since ID  once: restart journald if the file's id is not ID

Exit codes: 0 done; 2 usage; 65 no valid id in the file; 74 journald could
not be restarted; 75 (--watch) the watch failed.
`

func main() {
	cmd := cli.Command{Name: "machine-id", Usage: usage}
	fs := flag.NewFlagSet("machine-id", flag.ContinueOnError)
	watchFlag := fs.Bool("watch", false, "keep running and follow every change")
	since := fs.String("since", "", "the id journald runs under")
	rest, code, exit := cmd.Parse(fs, os.Args[1:])
	if exit {
		os.Exit(code)
	}
	if len(rest) != 0 || *watchFlag == (*since != "") {
		os.Exit(cmd.UsageError("one of --watch or --since ID is needed (got %q)", os.Args[1:]))
	}
	log := journal.New("cocoonbox-machine-id")
	if *watchFlag {
		os.Exit(watch(log))
	}
	f := &follower{log: log, last: *since}
	os.Exit(f.apply())
}

// follower restarts journald when the id moves on from last, the id it
// runs under.
type follower struct {
	log  *journal.Logger
	last string
}

func watch(log *journal.Logger) int {
	f := &follower{log: log}
	// The id at our start is the one journald started with (it starts
	// first, and a wake resumes both).
	f.last, _ = readID()
	ready := func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }
	err := pathwatch.Run([]string{machineIDPath}, func() { f.apply() }, ready, -1)
	log.Send(journal.Err, msgWatchEnded, fmt.Sprintf("cannot watch %s: %v", machineIDPath, err), "COCOONBOX_PATH", machineIDPath)
	return cli.TryLater
}

// apply restarts journald if the file holds a new valid id.
func (f *follower) apply() int {
	f.log.TagBox()
	id, err := readID()
	switch {
	case errors.Is(err, fs.ErrNotExist), err == nil && id == "":
		return cli.OK // no id yet (a writer that truncated first): not a new id
	case err != nil:
		f.log.Send(journal.Warning, msgBadID, fmt.Sprintf("%s: %v; journald stays under %s", machineIDPath, err, f.last),
			"COCOONBOX_PATH", machineIDPath)
		return cli.Invalid
	case id == f.last:
		return cli.OK
	}
	if out, err := exec.Command("systemctl", "restart", "systemd-journald.service").CombinedOutput(); err != nil {
		f.log.Send(journal.Err, msgRestartErr, fmt.Sprintf("cannot restart journald for the machine id %s: %v: %s", id, err, bytes.TrimSpace(out)),
			"COCOONBOX_MACHINE_ID", id, "COCOONBOX_OLD_MACHINE_ID", f.last)
		return cli.IO
	}
	f.log.Send(journal.Notice, msgRestarted, fmt.Sprintf("machine id %s → %s: journald restarted under the new id", f.last, id),
		"COCOONBOX_MACHINE_ID", id, "COCOONBOX_OLD_MACHINE_ID", f.last)
	f.last = id
	return cli.OK
}

// readID reads /etc/machine-id: "" when empty, an error when it holds
// anything but 32 lower-case hex digits and a newline.
func readID() (string, error) {
	data, err := os.ReadFile(machineIDPath)
	if err != nil {
		return "", err
	}
	id := string(bytes.TrimSuffix(data, []byte("\n")))
	if id == "" {
		return "", nil
	}
	if len(id) != 32 || bytes.ContainsFunc([]byte(id), func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }) {
		return "", fmt.Errorf("%q is no machine id (32 lower-case hex digits)", id)
	}
	return id, nil
}
