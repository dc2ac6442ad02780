// Command identity writes and shows the box identity record,
// /run/cocoonbox-identity/identity (Contract: Box identity).
//
//	identity write   < record.json   validate the JSON on stdin and write it atomically
//	identity show                    print the current record, after every check of Load
//	identity show --hostname         print the hostname the record maps to
//
// The api runs `identity write` through sandboxd at every boot and wake.
// Exit codes (sysexits(3)):
//
//	0   done
//	64  usage: unknown command or option
//	65  the record (stdin, or the file for show) is invalid; the error names the field and the rule
//	66  show: there is no identity file yet
//	73  the directory or file is unsafe (a symlink, not root's, group- or world-writable, not regular, oversize)
//	74  an I/O error
//	75  try again later (the system was out of space or memory)
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/guest/journal"
	"github.com/cocoonbox/cocoonbox/internal/version"
)

// MESSAGE_IDs of the writer's journal entries (catalog:
// /usr/lib/systemd/catalog/cocoonbox-identity.catalog).
const (
	msgWritten = "409bf9cd47d04e33a117d3ef0828f1d2"
	msgRefused = "06e1415d05ac4e2cb03563d4220f734f"
)

// Exit codes.
const (
	exitOK       = 0
	exitUsage    = 64
	exitInvalid  = 65
	exitNoInput  = 66
	exitUnsafe   = 73
	exitIO       = 74
	exitTryLater = 75
)

const usage = `usage: identity write < record.json
       identity show [--hostname]
       identity --version

write  reads one identity record (JSON) on stdin, validates it strictly and
       writes it atomically to /run/cocoonbox-identity/identity (root 0644,
       in a root 0755 directory): temp file, fsync, rename, directory fsync.
       Invalid input leaves the previous file as it was.
show   prints the current record after every check of Load (owner, mode,
       symlinks, size, content); --hostname prints the hostname it maps to.

The record: {"box_id":"cb-[a-z0-9]{1,60}","wake_id":"1-128 printable ASCII",
"key_id":"first 16 hex of sha256(key)","public_key":"ed25519, base64url, no
padding","name":"[A-Za-z0-9_-]{0,63}"}; at most 4096 bytes.

exit codes: 0 done; 64 usage; 65 invalid record (the error names the field
and the rule); 66 no identity file (show); 73 unsafe directory or file
(symlink, not root's, group/world-writable, not regular, oversize);
74 I/O error; 75 try again later (out of space or memory).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "--version":
		fmt.Fprintln(stdout, "identity", version.Version)
		return exitOK
	case "write":
		if len(args) != 1 {
			fmt.Fprintf(stderr, "identity write: takes no arguments (got %q); the record comes on stdin\n", args[1:])
			return exitUsage
		}
		return write(stdin, stderr)
	case "show":
		hostname := false
		for _, a := range args[1:] {
			if a != "--hostname" {
				fmt.Fprintf(stderr, "identity show: unknown option %q (allowed: --hostname)\n", a)
				return exitUsage
			}
			hostname = true
		}
		return show(hostname, stdout, stderr)
	}
	fmt.Fprintf(stderr, "identity: unknown command %q (allowed: write, show, --help, --version)\n", args[0])
	return exitUsage
}

func write(stdin io.Reader, stderr io.Writer) int {
	log := journal.New("cocoonbox-identity")
	log.Stderr = io.Discard // the one-line error below is the stderr form
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "identity write: %v\n", err)
		log.Send(journal.Err, msgRefused, "identity write refused: "+err.Error(),
			"COCOONBOX_PATH", identity.Path, "COCOONBOX_REASON", err.Error())
		return code
	}
	data, err := io.ReadAll(io.LimitReader(stdin, identity.MaxSize+1))
	if err != nil {
		return fail(exitIO, fmt.Errorf("read stdin: %w", err))
	}
	id, err := identity.Parse(data)
	if err != nil {
		return fail(exitInvalid, fmt.Errorf("stdin: %w", err))
	}
	log.Set("COCOONBOX_BOX_ID", id.BoxID)
	log.Set("COCOONBOX_WAKE_ID", id.WakeID)
	if err := identity.Write(identity.Dir, id); err != nil {
		return fail(code(err), err)
	}
	if err := identity.MarkPending(); err != nil {
		// The file is in place and PathChanged= sees it; only a write
		// during a run of the hostname helper could be missed.
		log.Send(journal.Warning, msgRefused, "cannot mark the identity pending: "+err.Error(), "COCOONBOX_PATH", identity.PendingPath)
	}
	log.Send(journal.Info, msgWritten, fmt.Sprintf("identity of %s written (wake %s, name %q)", id.BoxID, id.WakeID, id.Name),
		"COCOONBOX_PATH", identity.Path, "COCOONBOX_KEY_ID", id.KeyID, "COCOONBOX_NAME", id.Name)
	return exitOK
}

func show(hostname bool, stdout, stderr io.Writer) int {
	id, err := identity.Load()
	if err != nil {
		fmt.Fprintf(stderr, "identity show: %v\n", err)
		return code(err)
	}
	if hostname {
		h, err := id.Hostname()
		if err != nil {
			fmt.Fprintf(stderr, "identity show: %s: %v\n", identity.Path, err)
			return exitInvalid
		}
		fmt.Fprintln(stdout, h)
		return exitOK
	}
	_, _ = stdout.Write(id.Marshal())
	return exitOK
}

// code maps an error to the exit code its kind documents.
func code(err error) int {
	switch {
	case errors.Is(err, identity.ErrInvalid):
		return exitInvalid
	case errors.Is(err, identity.ErrUnsafe):
		return exitUnsafe
	case errors.Is(err, fs.ErrNotExist):
		return exitNoInput
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EDQUOT),
		errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return exitTryLater
	}
	return exitIO
}
