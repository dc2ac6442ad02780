// Command xauthority-init gives display :0 a fresh MIT-MAGIC-COOKIE-1 in
// /run/cocoonbox-x/Xauthority before Xorg starts (ExecStartPre= of
// cocoonbox-xorg.service, as root). Desk tier.
//
// Contract: Box identity ("the X cookie holds for any hostname"). The one
// entry has the family FamilyWild (0xffff) and no address, so it matches
// whatever the host name is: the box is renamed by cocoonbox-hostname while
// Xorg and the session run, and a FamilyLocal entry keyed by the old name
// would lock every new client out.
//
// The file is root:user 0640: Xorg (root) and the desktop user's session and
// toolhost read it; nobody but root writes it. It is made in a fresh
// directory only root can write (/run/.cocoonbox-xauth.*, on the same file
// system), its owner and mode set on the descriptor, and renamed into place,
// so a client never reads a half-written file, and root never writes, chowns
// or chmods by name in /run/cocoonbox-x: user owns that directory and could
// put a symlink at any name there, making root change another file's owner
// and mode (issue 18, item 3). The rename replaces whatever file or symlink
// stands at the name and follows nothing.
//
// One process on the boot's path where the shell script it replaces ran
// about ten (mktemp, od, tr, xauth, chown, chmod, mv, rm): about 90 ms of
// every desk box's boot on the 2-core host (issue 24, Deliver 9).
//
// Exit codes (package cli, docs/conventions.md's table): 0 done; 2 usage;
// 1 the cookie could not be made (the reason on stderr, which systemd puts
// in the unit's journal); Xorg is then not started.
package main

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"github.com/cocoonbox/cocoonbox/guest/cli"
)

const (
	// cookieDir is the image contract's user-owned 0700 directory
	// (tmpfiles.d), cookieName the file in it that Xorg's -auth and the
	// session's XAUTHORITY name.
	cookieDir  = "/run/cocoonbox-x"
	cookieName = "Xauthority"
	// workParent holds the fresh root-only directory the file is made in:
	// the same file system as cookieDir, so the rename is atomic.
	workParent = "/run"
	// readers is the group that may read the cookie: the desktop user's.
	readers = "user"
)

const usage = `usage: xauthority-init
       xauthority-init --help | --version

Writes a fresh MIT-MAGIC-COOKIE-1 for display :0 (one FamilyWild entry)
to /run/cocoonbox-x/Xauthority, root:user 0640, atomically
(ExecStartPre= of cocoonbox-xorg.service, as root).

Exit codes: 0 done; 2 usage; 1 the cookie could not be made.
`

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cmd := cli.Command{Name: "xauthority-init", Usage: usage}
	rest, code, exit := cmd.Parse(nil, args)
	if exit {
		return code
	}
	if len(rest) != 0 {
		return cmd.UsageError("no arguments are taken (got %q)", rest)
	}
	if err := initCookie(); err != nil {
		fmt.Fprintf(os.Stderr, "xauthority-init: %v\n", err)
		return cli.Failed
	}
	return cli.OK
}

func initCookie() error {
	g, err := user.LookupGroup(readers)
	if err != nil {
		return fmt.Errorf("the cookie's group: %w", err)
	}
	var gid int
	if _, err := fmt.Sscan(g.Gid, &gid); err != nil {
		return fmt.Errorf("group %s has gid %q: %w", readers, g.Gid, err)
	}
	cookie := make([]byte, 16)
	if _, err := rand.Read(cookie); err != nil {
		return fmt.Errorf("a cookie from the kernel's random source: %w", err)
	}
	return writeCookie(workParent, filepath.Join(cookieDir, cookieName), gid, cookie)
}

// entry is one Xauthority record (libXau's format: big-endian 16-bit
// family, then address, display number, auth name and auth data, each a
// big-endian 16-bit length and its bytes): FamilyWild, no address,
// display "0", MIT-MAGIC-COOKIE-1 with cookie.
func entry(cookie []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0xffff) // FamilyWild
	for _, field := range [][]byte{nil, []byte("0"), []byte("MIT-MAGIC-COOKIE-1"), cookie} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(field)))
		b = append(b, field...)
	}
	return b
}

// writeCookie makes dest hold the entry for cookie, owned by the caller
// (root) and group gid, mode 0640: written in a fresh directory of its own
// under workParent, owner and mode set on the descriptor, flushed, and
// renamed over dest.
func writeCookie(workParent, dest string, gid int, cookie []byte) error {
	work, err := os.MkdirTemp(workParent, ".cocoonbox-xauth.")
	if err != nil {
		return fmt.Errorf("a work directory in %s: %w", workParent, err)
	}
	defer os.RemoveAll(work)
	tmp := filepath.Join(work, cookieName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = func() error {
		if _, err := f.Write(entry(cookie)); err != nil {
			return err
		}
		if err := f.Chown(-1, gid); err != nil {
			return err
		}
		if err := f.Chmod(0o640); err != nil {
			return err
		}
		return f.Sync()
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing the cookie in %s: %w", work, err)
	}
	// Never into a directory user may have made at the name: rename(2)
	// onto a directory fails, onto a file or symlink replaces it.
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("putting the cookie in place: %w", err)
	}
	return nil
}
