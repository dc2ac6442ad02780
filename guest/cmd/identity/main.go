// Command identity writes and shows the box identity record,
// /run/cocoonbox-identity/identity (Contract: Box identity).
//
//	identity write   < record.json   validate the JSON on stdin and write it atomically
//	identity show                    print the current record, after every check of Load
//	identity show --hostname         print the hostname the record maps to
//
// The api runs `identity write` through sandboxd at every boot and wake.
// Exit codes (package cli, docs/conventions.md's table):
//
//	0   done
//	2   usage: unknown command or option
//	65  the record (stdin, or the file for show) is invalid, or its name maps
//	    to no hostname; the error names the field and the rule
//	66  show: there is no identity file yet
//	73  the directory or file is unsafe (a symlink, not root's, group- or world-writable, not regular, oversize)
//	74  an I/O error
//	75  try again later (the system was out of space or memory)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/guest/identity"
	"github.com/cocoonbox/cocoonbox/guest/journal"
)

// MESSAGE_IDs of the writer's journal entries (catalog:
// /usr/lib/systemd/catalog/cocoonbox-identity.catalog).
const (
	msgWritten = "409bf9cd47d04e33a117d3ef0828f1d2"
	msgRefused = "06e1415d05ac4e2cb03563d4220f734f"
)

const usage = `usage: identity write < record.json
       identity show [--hostname]
       identity --help | --version

write  reads one identity record (JSON) on stdin, validates it strictly and
       writes it atomically to /run/cocoonbox-identity/identity (root 0644,
       in a root 0755 directory): temp file, fsync, rename, directory fsync.
       Invalid input leaves the previous file as it was.
show   prints the current record after every check of Load (owner, mode,
       symlinks, size, content); --hostname prints the hostname it maps to.

The record: {"box_id":"cb-[a-z0-9]{1,60}","wake_id":"1-128 printable ASCII",
"key_id":"first 16 hex of sha256(key)","public_key":"ed25519, base64url, no
padding","name":"[A-Za-z0-9_-]{0,63}"}; at most 4096 bytes.

A name that maps to no hostname (one starting or ending in '_' or '-') is
refused by write, as the hostname helper would refuse it.

exit codes: 0 done; 2 usage; 65 invalid record (the error names the field
and the rule); 66 no identity file (show); 73 unsafe directory or file
(symlink, not root's, group/world-writable, not regular, oversize);
74 I/O error; 75 try again later (out of space or memory).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := cli.Command{Name: "identity", Usage: usage, Stdout: stdout, Stderr: stderr}
	rest, code, exit := cmd.Parse(nil, args)
	if exit {
		return code
	}
	if len(rest) == 0 {
		return cmd.UsageError("a command is needed (write or show)")
	}
	switch rest[0] {
	case "write":
		sub := cli.Command{Name: "identity write", Usage: usage, Stdout: stdout, Stderr: stderr}
		more, code, exit := sub.Parse(nil, rest[1:])
		if exit {
			return code
		}
		if len(more) != 0 {
			return sub.UsageError("takes no arguments (got %q); the record comes on stdin", more)
		}
		return write(stdin, stderr)
	case "show":
		sub := cli.Command{Name: "identity show", Usage: usage, Stdout: stdout, Stderr: stderr}
		fs := flag.NewFlagSet("show", flag.ContinueOnError)
		hostname := fs.Bool("hostname", false, "print the hostname the record maps to")
		more, code, exit := sub.Parse(fs, rest[1:])
		if exit {
			return code
		}
		if len(more) != 0 {
			return sub.UsageError("unknown argument %q (allowed: --hostname)", more[0])
		}
		return show(*hostname, stdout, stderr)
	}
	return cmd.UsageError("unknown command %q (allowed: write, show, --help, --version)", rest[0])
}

func write(stdin io.Reader, stderr io.Writer) int {
	log := journal.New("cocoonbox-identity")
	// The one-line error below is the stderr form, always (sandboxd hands
	// it to the api), so the journal does not echo it a second time.
	log.Stderr, log.Echo = io.Discard, nil
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "identity write: %v\n", err)
		log.Send(journal.Err, msgRefused, "identity write refused: "+err.Error(),
			"COCOONBOX_PATH", identity.Path, "COCOONBOX_REASON", err.Error())
		return code
	}
	data, err := io.ReadAll(io.LimitReader(stdin, identity.MaxSize+1))
	if err != nil {
		return fail(cli.IO, fmt.Errorf("read stdin: %w", err))
	}
	id, err := identity.Parse(data)
	if err != nil {
		return fail(cli.Invalid, fmt.Errorf("stdin: %w", err))
	}
	// A record the hostname helper would refuse is refused here, so the
	// api hears of it instead of a success the box never applies.
	if _, err := id.Hostname(); err != nil {
		return fail(cli.Invalid, fmt.Errorf("stdin: %w", err))
	}
	log.Set("COCOONBOX_BOX_ID", id.BoxID)
	log.Set("COCOONBOX_WAKE_ID", id.WakeID)
	if err := identity.Write(identity.Dir, id); err != nil {
		return fail(code(err), err)
	}
	log.Send(journal.Info, msgWritten, fmt.Sprintf("identity of %s written (wake %s, name %q)", id.BoxID, id.WakeID, id.Name),
		"COCOONBOX_PATH", identity.Path, "COCOONBOX_KEY_ID", id.KeyID, "COCOONBOX_NAME", id.Name)
	return cli.OK
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
			return cli.Invalid
		}
		fmt.Fprintln(stdout, h)
		return cli.OK
	}
	_, _ = stdout.Write(id.Marshal())
	return cli.OK
}

// code maps an error to the exit code its kind documents.
func code(err error) int {
	switch {
	case errors.Is(err, identity.ErrInvalid):
		return cli.Invalid
	case errors.Is(err, identity.ErrUnsafe):
		return cli.Unsafe
	case errors.Is(err, fs.ErrNotExist):
		return cli.NoInput
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.ENOMEM), errors.Is(err, unix.EDQUOT),
		errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return cli.TryLater
	}
	return cli.IO
}
