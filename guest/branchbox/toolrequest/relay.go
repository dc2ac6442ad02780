// The relay (relay.go) carries one request to the linked endpoint socket
// (Contract: the dispatcher, "relays one newline-delimited JSON frame
// followed by write-side EOF"; Security contract, "Unix relay operations
// are time-bounded").

package toolrequest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/rundir"
)

// errTransport wraps every failure to reach the endpoint or to hear its
// whole answer in time: the one kind a signed exact replay may retry
// within the wait window. Framing errors are *branchbox.RuleError instead
// (rule relay-framing), terminal.
var errTransport = errors.New("endpoint transport failed")

// Endpoint is the linked tool-endpoint socket as the run recorded it: its
// path, device and inode (rundir.Source, the ledger's), and the run's
// owner, who (or root) must be the process answering on it.
type Endpoint struct {
	Path     string
	Dev, Ino uint64
	Owner    uint32
}

// relayFrame sends frame (one JSON request, no newline) to the endpoint's Unix
// socket as one line, half-closes the write side, and returns the one
// response line (without its newline): at most MaxRequest bytes,
// ending in '\n'; anything after that line is never read. The whole
// exchange ends by timeout.
//
// The socket is dialled through a descriptor, never by its name (a name
// a symlink swapped in would hand the capability to whatever it points
// at): ep.Path opened O_PATH without following any symlink, held to
// ep's device and inode, connected as /proc/self/fd/N; once connected,
// the peer's credentials (SO_PEERCRED) must be ep.Owner's or root's. A
// symlink, another socket or another peer is terminal (rule
// source-ownership-or-type); a socket that is not there is a transport
// failure.
func relayFrame(ctx context.Context, ep Endpoint, frame []byte, timeout time.Duration) ([]byte, error) {
	path := ep.Path
	if bytes.ContainsAny(frame, "\n\r") {
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the request frame holds a newline")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := dial(ctx, ep)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errTransport, path, err)
	}
	uc := conn
	if _, err := uc.Write(append(append([]byte(nil), frame...), '\n')); err != nil {
		return nil, fmt.Errorf("%w: %s: sending: %v", errTransport, path, err)
	}
	if err := uc.CloseWrite(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errTransport, path, err)
	}
	// ReadBytes copies each buffered chunk out before reading the next:
	// ReadSlice's result is the reader's own buffer, which the next read
	// overwrites (an answer over the 64 KiB buffer came back corrupt).
	r := bufio.NewReaderSize(io.LimitReader(uc, MaxRequest+2), 64<<10)
	line, err := r.ReadBytes('\n')
	switch {
	case len(bytes.TrimSuffix(line, []byte("\n"))) > MaxRequest:
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the response is larger than %d bytes", MaxRequest)
	case err == io.EOF:
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the response ended without a newline")
	case err != nil:
		return nil, fmt.Errorf("%w: %s: receiving: %v", errTransport, path, err)
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}

// dial connects to ep through an O_PATH descriptor of its socket and
// checks the peer (see relayFrame).
func dial(ctx context.Context, ep Endpoint) (*net.UnixConn, error) {
	fd, err := rundir.OpenPath(ep.Path, unix.O_PATH)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("%w: %s: %v", errTransport, ep.Path, err)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return nil, branchbox.Refuse(branchbox.RuleSourceType, ep.Path, "is or passes through a symlink; the endpoint socket is dialled only as itself")
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", errTransport, ep.Path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errTransport, ep.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Dev != ep.Dev || st.Ino != ep.Ino {
		return nil, branchbox.Refuse(branchbox.RuleSourceType, ep.Path, "is device %d inode %d (mode %o), not the endpoint socket the run recorded (device %d inode %d)", st.Dev, st.Ino, st.Mode, ep.Dev, ep.Ino)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errTransport, ep.Path, err)
	}
	uc := conn.(*net.UnixConn)
	raw, err := uc.SyscallConn()
	var cred *unix.Ucred
	if err == nil {
		cerr := raw.Control(func(s uintptr) { cred, err = unix.GetsockoptUcred(int(s), unix.SOL_SOCKET, unix.SO_PEERCRED) })
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("%w: %s: peer credentials: %v", errTransport, ep.Path, err)
	}
	if cred.Uid != 0 && cred.Uid != ep.Owner {
		uc.Close()
		return nil, branchbox.Refuse(branchbox.RuleSourceType, ep.Path, "is answered by uid %d (pid %d), not the run's owner %d or root", cred.Uid, cred.Pid, ep.Owner)
	}
	return uc, nil
}

// endpointAt is the endpoint at path as it is now (its device, inode and
// owner), for a caller that checks it itself (tests, a benchmark).
func endpointAt(path string) (Endpoint, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return Endpoint{}, err
	}
	return Endpoint{Path: path, Dev: st.Dev, Ino: st.Ino, Owner: st.Uid}, nil
}
