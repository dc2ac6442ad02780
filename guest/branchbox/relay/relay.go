// Package relay carries one request to the linked endpoint socket
// (Contract: the dispatcher, "relays one newline-delimited JSON frame
// followed by write-side EOF"; Security contract, "Unix relay operations
// are time-bounded").
package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/cocoonbox/cocoonbox/guest/branchbox"
	"github.com/cocoonbox/cocoonbox/guest/branchbox/envelope"
)

// ErrTransport wraps every failure to reach the endpoint or to hear its
// whole answer in time: the one kind a signed exact replay may retry
// within the wait window. Framing errors are *branchbox.RuleError instead
// (rule relay-framing), terminal.
var ErrTransport = errors.New("endpoint transport failed")

// Relay sends frame (one JSON request, no newline) to the Unix socket at
// path as one line, half-closes the write side, and returns the one
// response line (without its newline): at most envelope.MaxRequest bytes,
// ending in '\n'; anything after that line is never read. The whole
// exchange ends by timeout.
func Relay(ctx context.Context, path string, frame []byte, timeout time.Duration) ([]byte, error) {
	if bytes.ContainsAny(frame, "\n\r") {
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the request frame holds a newline")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTransport, path, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTransport, path, err)
	}
	uc := conn.(*net.UnixConn)
	if _, err := uc.Write(append(append([]byte(nil), frame...), '\n')); err != nil {
		return nil, fmt.Errorf("%w: %s: sending: %v", ErrTransport, path, err)
	}
	if err := uc.CloseWrite(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTransport, path, err)
	}
	// ReadBytes copies each buffered chunk out before reading the next:
	// ReadSlice's result is the reader's own buffer, which the next read
	// overwrites (an answer over the 64 KiB buffer came back corrupt).
	r := bufio.NewReaderSize(io.LimitReader(uc, envelope.MaxRequest+2), 64<<10)
	line, err := r.ReadBytes('\n')
	switch {
	case len(bytes.TrimSuffix(line, []byte("\n"))) > envelope.MaxRequest:
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the response is larger than %d bytes", envelope.MaxRequest)
	case err == io.EOF:
		return nil, branchbox.Refuse(branchbox.RuleFraming, path, "the response ended without a newline")
	case err != nil:
		return nil, fmt.Errorf("%w: %s: receiving: %v", ErrTransport, path, err)
	}
	return bytes.TrimSuffix(line, []byte("\n")), nil
}
