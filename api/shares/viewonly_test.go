package shares

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

func keyEvent(down bool, key uint32) []byte {
	b := []byte{4, 0, 0, 0, 0, 0, 0, 0}
	if down {
		b[1] = 1
	}
	binary.BigEndian.PutUint32(b[4:], key)
	return b
}

func updateRequest() []byte { return []byte{3, 1, 0, 0, 0, 0, 5, 0, 3, 32} }

func cutText(text string, extended bool) []byte {
	n := int32(len(text))
	if extended {
		n = -n
	}
	b := []byte{6, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], uint32(n))
	return append(b, text...)
}

// What a view-only viewer sends reaches the box without its input, fed
// one byte at a time and in one piece: the handshake (its ClientInit made
// shared), SetEncodings, FramebufferUpdateRequest, EnableContinuousUpdates
// and a ClientFence pass; KeyEvent, PointerEvent, both kinds of
// ClientCutText, QEMU's extended KeyEvent, SetDesktopSize and xvp are
// dropped whole.
func TestViewOnlyDropsEveryInputMessage(t *testing.T) {
	var in, want bytes.Buffer
	both := func(b []byte) { in.Write(b); want.Write(b) }
	dropped := func(b []byte) { in.Write(b) }
	both([]byte("RFB 003.008\n"))
	both([]byte{1})                                                           // security type None
	in.Write([]byte{0})                                                       // ClientInit, exclusive ...
	want.Write([]byte{1})                                                     // ... made shared
	both([]byte{2, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 16, 0xff, 0xff, 0xfe, 0xcc}) // SetEncodings of 3
	dropped(keyEvent(true, 'x'))
	both(updateRequest())
	dropped([]byte{5, 1, 0, 10, 0, 20}) // PointerEvent
	dropped(cutText("secret paste", false))
	dropped(cutText("extended clipboard", true))
	dropped([]byte{255, 0, 0, 1, 0, 0, 0, 'x', 0, 0, 0, 45}) // QEMU extended KeyEvent
	dropped(append([]byte{251, 0, 5, 0, 3, 32, 1, 0}, make([]byte, 16)...))
	dropped([]byte{250, 0, 1, 2})                                                     // xvp shutdown
	both([]byte{150, 1, 0, 0, 0, 0, 5, 0, 3, 32})                                     // EnableContinuousUpdates
	both([]byte{248, 0, 0, 0, 0, 0, 0, 3, 2, 'h', 'i'})                               // ClientFence with 2 bytes
	both([]byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0}) // SetPixelFormat
	dropped(keyEvent(false, 'x'))

	var f ViewOnly
	got, err := f.Filter(in.Bytes())
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("in one piece: %v\n got %v\nwant %v", err, got, want.Bytes())
	}
	f = ViewOnly{}
	var bytewise []byte
	for _, c := range in.Bytes() {
		out, err := f.Filter([]byte{c})
		if err != nil {
			t.Fatalf("a byte at a time: %v", err)
		}
		bytewise = append(bytewise, out...)
	}
	if !bytes.Equal(bytewise, want.Bytes()) {
		t.Fatalf("a byte at a time:\n got %v\nwant %v", bytewise, want.Bytes())
	}
}

// A message a view-only viewer may not send and that cannot be framed
// ends it with an error naming it, as do a version that is not RFB 3 and
// a security type other than None.
func TestViewOnlyRefusesWhatItCannotFrame(t *testing.T) {
	for _, c := range []struct {
		what string
		in   []byte
		want string
	}{
		{"an unknown type", append([]byte("RFB 003.008\n\x01\x01"), 77), "type 77"},
		{"a QEMU audio message", append([]byte("RFB 003.008\n\x01\x01"), 255, 1, 0, 0), "subtype 1"},
		{"not RFB", []byte("GET / HTTP/1.1\r\n"), "is not 3.x"},
		{"VNC authentication", []byte("RFB 003.008\n\x02"), "security type 2"},
	} {
		var f ViewOnly
		_, err := f.Filter(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
	// RFB 3.3: no security type from the viewer, ClientInit next.
	var f ViewOnly
	got, err := f.Filter(append([]byte("RFB 003.003\n\x00"), keyEvent(true, 'a')...))
	if err != nil || string(got) != "RFB 003.003\n\x01" {
		t.Errorf("RFB 3.3: %q %v", got, err)
	}
}
