package local

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// readiness hears a box's systemd finish its boot: systemd-nspawn
// --notify-ready=yes forwards the READY=1 the box's systemd sends once its
// boot's jobs are done ("Startup finished": running or degraded, what
// `systemctl is-system-running --wait` answers on) to nspawn's own
// NOTIFY_SOCKET, which is this socket. It replaced asking systemctl
// through the box's door every 10 ms from the box's first moment: each
// try was four processes, and a boot on two cores is short of CPU, not of
// waiting (issue 24, Deliver 9).
//
// The socket is a file under readyDir with a random name: nspawn runs in
// the box's network namespace (boot.go: it cannot join one from inside
// the box's user namespace), so an abstract socket of the supervisor's
// namespace is out of its reach; a datagram counts only when the kernel
// says nspawn itself sent it (SCM_CREDENTIALS), so no other process can
// answer for a box.
type readiness struct {
	conn  *net.UnixConn
	name  string // NOTIFY_SOCKET's value: the socket's path
	ready chan struct{}
}

// listenReady opens a machine's readiness socket; the caller starts
// nspawn with NOTIFY_SOCKET=r.name, then calls serve with its pid.
func listenReady(id string) (*readiness, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(readyDir, 0o700); err != nil {
		return nil, fmt.Errorf("readiness socket: %w", err)
	}
	// The id is not in the name: a path may have 108 bytes at most.
	name := filepath.Join(readyDir, hex.EncodeToString(b[:]))
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("readiness socket of %s: %w", id, err)
	}
	raw, err := conn.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) })
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		conn.Close()
		os.Remove(name)
		return nil, fmt.Errorf("readiness socket: SO_PASSCRED: %w", err)
	}
	return &readiness{conn: conn, name: name, ready: make(chan struct{})}, nil
}

// serve reads notifications until the socket is closed, and closes ready
// at the first READY=1 whose sender is pid (nspawn).
func (r *readiness) serve(pid int) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	heard := false
	for {
		n, oobn, _, _, err := r.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		if !sentBy(oob[:oobn], pid) {
			continue
		}
		for _, line := range bytes.Split(buf[:n], []byte("\n")) {
			if string(line) == "READY=1" && !heard {
				heard = true
				close(r.ready)
			}
		}
	}
}

// sentBy reports whether a datagram's control data carries pid's
// credentials.
func sentBy(oob []byte, pid int) bool {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return false
	}
	for _, m := range msgs {
		if cred, err := unix.ParseUnixCredentials(&m); err == nil {
			return int(cred.Pid) == pid
		}
	}
	return false
}

// Close ends serve and removes the socket's file.
func (r *readiness) Close() {
	r.conn.Close()
	os.Remove(r.name)
}

// readyDir holds the readiness sockets.
var readyDir = "/run/cocoonbox/ready"
