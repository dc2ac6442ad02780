package shares

import (
	"encoding/binary"
	"fmt"
)

// ViewOnly filters the bytes a view-only viewer sends the box's VNC
// server (RFC 6143, the client's side of RFB 3.3 to 3.8, with TigerVNC's
// extensions): the handshake and the messages that only ask for pixels
// pass (SetPixelFormat, SetEncodings, FramebufferUpdateRequest,
// EnableContinuousUpdates, ClientFence); every input message is dropped
// whole (KeyEvent, PointerEvent, ClientCutText with the extended
// clipboard's, QEMU's extended KeyEvent, SetDesktopSize, xvp's shutdown
// and reboot); any other message type, which cannot be framed, is an
// error that ends the viewer. So the page is never trusted: the api
// parses what reaches the box. ClientInit's shared flag is set, so a
// viewer cannot disconnect the box's other viewers.
//
// Bytes are framed across calls (a message may come in pieces); nothing
// but a message's header (at most 8 bytes) is held between calls.
type ViewOnly struct {
	stage int    // handshake: 0 version, 1 security type, 2 ClientInit; 3 messages
	head  []byte // the partial version or message header
	minor int    // the client's RFB minor version
	pass  int    // bytes of the current message still to forward
	skip  int    // bytes of the current message still to drop
}

// header answers how many bytes of a message of type t must be read to
// know its length; 0 for a type a view-only viewer may not send.
func header(t byte) int {
	switch t {
	case 0, 3, 4, 5, 150, 250: // fixed lengths
		return 1
	case 2, 255: // SetEncodings' count, QEMU's subtype
		return 4
	case 6, 251: // ClientCutText's length, SetDesktopSize's screens
		return 8
	case 248: // ClientFence's payload length
		return 9
	}
	return 0
}

// length answers a message's whole length from its header h (header(t)
// bytes) and whether it reaches the box.
func length(h []byte) (int, bool, error) {
	switch h[0] {
	case 0: // SetPixelFormat
		return 20, true, nil
	case 2: // SetEncodings
		return 4 + 4*int(binary.BigEndian.Uint16(h[2:4])), true, nil
	case 3: // FramebufferUpdateRequest
		return 10, true, nil
	case 150: // EnableContinuousUpdates
		return 10, true, nil
	case 248: // ClientFence
		n := int(h[8])
		if n > 64 {
			return 0, false, fmt.Errorf("a ClientFence of %d payload bytes (at most 64)", n)
		}
		return 9 + n, true, nil
	case 4: // KeyEvent
		return 8, false, nil
	case 5: // PointerEvent
		return 6, false, nil
	case 6: // ClientCutText; a negative length is the extended clipboard's
		n := int64(int32(binary.BigEndian.Uint32(h[4:8])))
		if n < 0 {
			n = -n
		}
		return 8 + int(n), false, nil
	case 250: // xvp: shutdown, reboot, reset
		return 4, false, nil
	case 251: // SetDesktopSize
		return 8 + 16*int(h[6]), false, nil
	case 255: // QEMU client message
		if h[1] == 0 { // extended KeyEvent
			return 12, false, nil
		}
		return 0, false, fmt.Errorf("a QEMU client message of subtype %d", h[1])
	}
	return 0, false, fmt.Errorf("an RFB message of type %d", h[0])
}

// Filter answers what of in may reach the box (a new slice, possibly
// empty), or an error naming the first message a view-only viewer may
// not send or the handshake step it broke.
func (f *ViewOnly) Filter(in []byte) ([]byte, error) {
	var out []byte
	for len(in) > 0 {
		switch {
		case f.pass > 0:
			n := min(f.pass, len(in))
			out = append(out, in[:n]...)
			f.pass -= n
			in = in[n:]
			continue
		case f.skip > 0:
			n := min(f.skip, len(in))
			f.skip -= n
			in = in[n:]
			continue
		}
		switch f.stage {
		case 0: // ProtocolVersion: "RFB 003.00x\n"
			n := min(12-len(f.head), len(in))
			f.head = append(f.head, in[:n]...)
			in = in[n:]
			if len(f.head) < 12 {
				continue
			}
			var major, minor int
			if _, err := fmt.Sscanf(string(f.head), "RFB %3d.%3d\n", &major, &minor); err != nil || major != 3 {
				return nil, fmt.Errorf("view-only: the viewer's RFB version %q is not 3.x", f.head)
			}
			out = append(out, f.head...)
			f.head, f.minor = nil, minor
			f.stage = 1
			if minor < 7 { // 3.3: the server picks the security type
				f.stage = 2
			}
		case 1: // the security type the viewer picks: None alone
			if in[0] != 1 {
				return nil, fmt.Errorf("view-only: security type %d (the box's VNC offers None, 1)", in[0])
			}
			out = append(out, in[0])
			in = in[1:]
			f.stage = 2
		case 2: // ClientInit: always shared
			out = append(out, 1)
			in = in[1:]
			f.stage = 3
		default:
			if len(f.head) == 0 && header(in[0]) == 0 {
				return nil, fmt.Errorf("view-only: the viewer sent an RFB message of type %d, which a view-only viewer may not send", in[0])
			}
			t := in[0]
			if len(f.head) > 0 {
				t = f.head[0]
			}
			need := header(t)
			n := min(need-len(f.head), len(in))
			f.head = append(f.head, in[:n]...)
			in = in[n:]
			if len(f.head) < need {
				continue
			}
			total, reaches, err := length(f.head)
			if err != nil {
				return nil, fmt.Errorf("view-only: the viewer sent %v, which a view-only viewer may not send", err)
			}
			if reaches {
				out = append(out, f.head...)
				f.pass = total - len(f.head)
			} else {
				f.skip = total - len(f.head)
			}
			f.head = nil
		}
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}
