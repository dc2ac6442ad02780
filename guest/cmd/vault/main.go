// Command vault renders the box's API key records from the claim env file
// into /run/cocoonbox-vault (vault.sh, names, keys). cocoonbox-vault.service
// runs `vault --watch` from boot on (and cocoonbox-vault.path starts it
// again on a change of /run/silkd.env should it not run): it renders at
// start and after every change of the file. Without --watch it renders
// once, for an admin or a test.
//
// Contract: Box API keys.
//
// Exit codes of a single run (package cli, docs/conventions.md's table): 0
// rendered, or nothing to do (no claim env file yet); 65 the claim env file
// is unreadable or unparsable (the last good render stays; a retry of the
// same file fails again); 73 the vault directory's parent is missing (a
// retry would not make it); 75 the render could not be put in place (try
// again later); 2 bad usage. With --watch a bad file or a failed render is
// logged and the watch goes on; it exits 75 only when the watch itself
// fails.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/guest/vault"
	"golang.org/x/sys/unix"
)

// MESSAGE_IDs, one per kind of event (journalctl MESSAGE_ID=...).
const (
	msgRendered      = "b2089241d49f460bbbd6c6b20ee456f4" // a render is in place
	msgBadEnvFile    = "f7f04645966241808ea1d1fa65c9a541" // claim env unreadable/unparsable; last render kept
	msgRecordSkipped = "7f2f1796cc574af8ab8b944881feaee6" // one record refused, with its position and rule
	msgRecordWarning = "25a8738ef5574bddb481060141d797e5" // a record accepted with a caveat (not exported)
	msgInstallFailed = "0a34ca8b648f4fa9b01ce318012cd7f7" // the new render could not be put in place
	msgNoEnvFile     = "5d68765175924570a4897c7585b40a1e" // no claim env file: nothing to render
	msgEnvChanged    = "c43746e3bd68483581ddf99332bafcff" // the file changed during a render: render again
	msgEnvChurn      = "e1bb8fbba0694ffca74689f50e82368e" // the file kept changing: this run stops
	msgLockFailed    = "8761ac5208e2469f86a955fa13e613d7" // the vault's lock could not be taken
	msgNamesUnread   = "b78f924a30a64b0790fac230d2ae7b22" // the last render's names unread: no unset lines
	msgRecordsMore   = "cfcc76495fee4f4ca922912b0b48b233" // more refused records than are logged one by one
	msgWatchEnded    = "3659da8ae47444c4a040ef08f1505217" // the watch failed: exit 75, systemd restarts us
)

// maxRecordLogs bounds the per-record journal entries of one render; the
// rest are counted in one summary entry.
const maxRecordLogs = 100

// maxRounds bounds how often one run renders again because the claim env
// changed while it rendered.
const maxRounds = 20

const usage = `usage: vault [--watch] [--env FILE] [--dir DIR]
       vault --help | --version

Reads COCOONBOX_VAULT and COCOONBOX_CONNECT from the claim env file FILE
(default /run/silkd.env; the syntax of systemd's EnvironmentFile=) and
renders their records into DIR (default /run/cocoonbox-vault): vault.sh
(export/unset lines for login shells), names (every name exported since
boot) and keys (the records with hosts, NAME<TAB>placeholder<TAB>hosts<TAB>how).
The new render replaces the old one in a single rename. Refusals go to the
journal (journalctl -t cocoonbox-vault), and to stderr in a terminal.

--watch  keep running: render now, tell systemd it is ready, render again on
         every change of FILE (what cocoonbox-vault.service runs); bad files
         are logged and the watch goes on.

Exit codes: 0 rendered or nothing to do; 2 usage; 65 bad claim env file
(last render kept); 73 DIR's parent is missing; 75 could not put the render
in place (try again later). --watch exits 75 only if the watch fails.
`

func main() {
	cmd := cli.Command{Name: "vault", Usage: usage}
	fs := flag.NewFlagSet("vault", flag.ContinueOnError)
	envPath := fs.String("env", "/run/silkd.env", "the claim env file to read")
	dir := fs.String("dir", "/run/cocoonbox-vault", "the vault directory to render into")
	watchFlag := fs.Bool("watch", false, "keep running and render every change")
	rest, code, exit := cmd.Parse(fs, os.Args[1:])
	if exit {
		os.Exit(code)
	}
	if len(rest) != 0 {
		os.Exit(cmd.UsageError("takes no arguments (got %q)", rest))
	}
	log := journal.New("cocoonbox-vault")
	if *watchFlag {
		ready := func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyReady) }
		os.Exit(watch(log, *envPath, filepath.Clean(*dir), ready, -1))
	}
	os.Exit(run(log, *envPath, filepath.Clean(*dir)))
}

// installCode is the exit code of a render that could not be put in place:
// a missing parent of the vault directory is no passing condition.
func installCode(err error) int {
	if errors.Is(err, fs.ErrNotExist) {
		return cli.Unsafe
	}
	return cli.TryLater
}

func run(log *journal.Logger, envPath, dir string) int {
	// The box of this render, read now: --watch runs from boot, before the
	// api writes the identity, and across clones.
	log.TagBox()
	// One vault at a time: a second run (by hand, beside the service)
	// waits here rather than racing the swap.
	lock, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		log.Send(journal.Err, msgLockFailed, fmt.Sprintf("cannot open the vault's lock: %v", err), "COCOONBOX_PATH", dir+".lock")
		return installCode(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		log.Send(journal.Err, msgLockFailed, fmt.Sprintf("cannot lock the vault: %v", err), "COCOONBOX_PATH", dir+".lock")
		return cli.TryLater
	}

	for round := 1; ; round++ {
		data, stamp, err := vault.ReadEnvFile(envPath)
		if errors.Is(err, vault.ErrNoEnvFile) {
			log.Send(journal.Notice, msgNoEnvFile, fmt.Sprintf("no claim env file %s: the vault stays as it is", envPath), "COCOONBOX_PATH", envPath)
			return cli.OK
		}
		if err != nil {
			log.Send(journal.Err, msgBadEnvFile, fmt.Sprintf("cannot read the claim env, keeping the last good render: %v", err), "COCOONBOX_PATH", envPath)
			return cli.Invalid
		}
		recs, err := vault.ParseClaimEnv(data)
		if err != nil {
			log.Send(journal.Err, msgBadEnvFile, fmt.Sprintf("%s: %v; keeping the last good render", envPath, err), "COCOONBOX_PATH", envPath)
			return cli.Invalid
		}
		logRecords(log, envPath, recs)
		names, err := vault.ReadNames(dir)
		if err != nil {
			// Without the old names a removed record would not be unset;
			// say so, and render what we know.
			log.Send(journal.Warning, msgNamesUnread, fmt.Sprintf("cannot read the names of the last render: %v", err), "COCOONBOX_PATH", dir)
		}
		id := renderID()
		files := vault.Render(id, envPath, recs.Accepted, names)
		if err := vault.Install(dir, files); err != nil {
			log.Send(journal.Err, msgInstallFailed, fmt.Sprintf("cannot put the render in place, keeping the last one: %v", err), "COCOONBOX_PATH", dir)
			return installCode(err)
		}
		exported, keys := 0, 0
		for _, r := range recs.Accepted {
			if r.Exported {
				exported++
			}
			if len(r.Hosts) > 0 {
				keys++
			}
		}
		log.Send(journal.Info, msgRendered,
			fmt.Sprintf("rendered %d records (%d exported, %d with hosts), %d refused", len(recs.Accepted), exported, keys, len(recs.Rejected)),
			"COCOONBOX_PATH", dir, "COCOONBOX_VAULT_RENDER", id,
			"COCOONBOX_VAULT_RECORDS", strconv.Itoa(len(recs.Accepted)), "COCOONBOX_VAULT_REFUSED", strconv.Itoa(len(recs.Rejected)))

		// A change that lands while this run reads or renders: compare
		// the file now with the one that was read, and go again if it
		// moved. (A single run has no other way to see it; under --watch
		// the queued event would also bring another render.)
		now, err := vault.StatFile(envPath)
		if err != nil || now == stamp {
			return cli.OK
		}
		if round >= maxRounds {
			log.Send(journal.Warning, msgEnvChurn, fmt.Sprintf("%s keeps changing; stopping after %d renders (the next change starts another run)", envPath, round), "COCOONBOX_PATH", envPath)
			return cli.OK
		}
		log.Send(journal.Info, msgEnvChanged, fmt.Sprintf("%s changed while rendering; rendering again", envPath), "COCOONBOX_PATH", envPath)
	}
}

// logRecords sends one journal warning per refused or caveated record
// (at most maxRecordLogs, then a count).
func logRecords(log *journal.Logger, envPath string, recs *vault.Records) {
	n := 0
	send := func(id string, r vault.Reject, what string) {
		n++
		if n > maxRecordLogs {
			return
		}
		log.Send(journal.Warning, id, fmt.Sprintf("%s: %s %s", envPath, r.String(), what),
			"COCOONBOX_PATH", envPath, "COCOONBOX_VAULT_SOURCE", string(r.Source),
			"COCOONBOX_VAULT_POSITION", strconv.Itoa(r.Position), "COCOONBOX_VAULT_NAME", fmt.Sprintf("%q", r.Name),
			"COCOONBOX_VAULT_RULE", r.Rule)
	}
	for _, r := range recs.Rejected {
		send(msgRecordSkipped, r, "(record skipped)")
	}
	for _, w := range recs.Warnings {
		send(msgRecordWarning, w, "")
	}
	if n > maxRecordLogs {
		log.Send(journal.Warning, msgRecordsMore, fmt.Sprintf("%s: %d more records refused or warned about (not logged one by one)", envPath, n-maxRecordLogs),
			"COCOONBOX_PATH", envPath)
	}
}

// renderID names a render: the time and 4 random bytes.
func renderID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + hex.EncodeToString(b)
}
