package shares_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// rfbServer is a box's VNC as far as noVNC needs one (RFC 6143, 3.8,
// security None, a 64×48 desktop, or width×height, sent once as Raw):
// it counts the viewers it served, the KeyEvents and PointerEvents that
// reached it, and the viewers that went; it keeps the ClientCutTexts'
// texts, and sends each viewer cut as a ServerCutText after ServerInit.
type rfbServer struct {
	mu                    sync.Mutex
	opened, ended         int
	keys, pointers, other int
	cuts                  []string
	width, height         uint16
	cut                   string
}

func (s *rfbServer) count(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

func (s *rfbServer) state() (opened, ended, keys, pointers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, s.ended, s.keys, s.pointers
}

const rfbW, rfbH = 64, 48

func (s *rfbServer) serve(c net.Conn) {
	defer c.Close()
	defer s.count(func() { s.ended++ })
	var w, h uint16 = rfbW, rfbH
	var cut string
	s.count(func() {
		s.opened++
		if s.width > 0 {
			w, h = s.width, s.height
		}
		cut = s.cut
	})
	buf := make([]byte, 12)
	read := func(n int) []byte {
		if _, err := io.ReadFull(c, buf[:n]); err != nil {
			panic(err) // recovered below: the viewer went
		}
		return buf[:n]
	}
	defer func() { recover() }()
	c.Write([]byte("RFB 003.008\n"))
	read(12)
	c.Write([]byte{1, 1}) // one security type: None
	read(1)
	c.Write([]byte{0, 0, 0, 0}) // SecurityResult OK
	read(1)                     // ClientInit
	init := make([]byte, 24, 24+4)
	binary.BigEndian.PutUint16(init[0:], w)
	binary.BigEndian.PutUint16(init[2:], h)
	copy(init[4:], []byte{32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0})
	binary.BigEndian.PutUint32(init[20:], 4)
	c.Write(append(init, "desk"...))
	if cut != "" {
		m := []byte{3, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(m[4:], uint32(len(cut)))
		c.Write(append(m, cut...))
	}
	for {
		t := read(1)[0]
		switch t {
		case 0: // SetPixelFormat
			read(12)
			read(7)
		case 2: // SetEncodings
			n := binary.BigEndian.Uint16(read(3)[1:3])
			for range n {
				read(4)
			}
		case 3: // FramebufferUpdateRequest: a full Raw frame for a full request
			if read(9)[0] == 0 {
				u := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
				binary.BigEndian.PutUint16(u[8:], w)
				binary.BigEndian.PutUint16(u[10:], h)
				c.Write(append(u, make([]byte, int(w)*int(h)*4)...))
			}
		case 4:
			read(7)
			s.count(func() { s.keys++ })
		case 5:
			read(5)
			s.count(func() { s.pointers++ })
		case 6: // ClientCutText; a negative length is the extended clipboard's
			n := int(int32(binary.BigEndian.Uint32(read(7)[3:7])))
			text := make([]byte, max(n, -n))
			if _, err := io.ReadFull(c, text); err != nil {
				return
			}
			s.count(func() { s.cuts = append(s.cuts, string(text)) })
		default:
			s.count(func() { s.other++ })
			return
		}
	}
}

// chromium starts Chromium for a test of w's pages, its box served by
// box, both ending with the test (4 minutes at most).
func chromium(t *testing.T, w *world, box *rfbServer) (context.Context, *webdriver.Browser) {
	t.Helper()
	w.host.rfb = box.serve
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return ctx, b
}

// Issue 43, Must show: real Chromium, a profile of its own with nothing
// but the link, opens the share page and its screen connects; keys typed
// into a take-over share's screen reach the box and into a view-only
// share's do not (the api drops them, whatever the page sends); the page
// closes its screen while its tab is hidden and opens it again when
// shown (Contract: Idle user boxes); a guessed link says it does not work.
func TestTheSharePageInChromium(t *testing.T) {
	w, box, ctx, b := chromiumWorld(t)
	connected := func(what string) {
		t.Helper()
		if err := b.WaitFor(ctx, what, func(_, text string) bool { return strings.Contains(text, "A shared screen.") }); err != nil {
			t.Fatal(err)
		}
	}
	// typeAndLeave types into the screen, leaves the page and answers
	// the KeyEvents the box got: once the box saw its viewer go, every
	// byte the viewer sent before has passed the relay.
	typeAndLeave := func(secret string) int {
		t.Helper()
		opened0, _, keys0, _ := box.state()
		if err := b.Go(ctx, w.a.URL+shares.PagePath+"#"+secret); err != nil {
			t.Fatal(err)
		}
		connected("the share's screen")
		if err := b.Type(ctx, "#screen canvas", "hello"); err != nil {
			t.Fatal(err)
		}
		if err := b.Go(ctx, "about:blank"); err != nil {
			t.Fatal(err)
		}
		wait.Eventually(t, time.Minute, "the viewer gone from the box", func() (bool, string) {
			opened, ended, _, _ := box.state()
			return ended == opened && opened > opened0, fmt.Sprintf("%d opened, %d ended", opened, ended)
		})
		_, _, keys, _ := box.state()
		return keys - keys0
	}
	_, takeOver := w.create(t, false)
	if n := typeAndLeave(takeOver); n < 10 { // a down and an up per letter
		t.Fatalf("the control: a take-over share's box got %d KeyEvents for \"hello\", want 10", n)
	}
	_, viewOnly := w.create(t, true)
	if n := typeAndLeave(viewOnly); n != 0 {
		t.Errorf("a view-only share's box got %d KeyEvents", n)
	}

	// Hidden: a second tab over the page closes its screen; shown, it opens one again.
	if err := b.Go(ctx, w.a.URL+shares.PagePath+"#"+takeOver); err != nil {
		t.Fatal(err)
	}
	connected("the share's screen")
	first, err := b.Window(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opened, _, _, _ := box.state()
	if _, err := b.NewTab(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "the hidden tab's screen closed", func() (bool, string) {
		o, e, _, _ := box.state()
		return o == e, fmt.Sprintf("%d opened, %d ended", o, e)
	})
	if err := b.SwitchTo(ctx, first); err != nil {
		t.Fatal(err)
	}
	connected("the screen open again when shown")
	if o, _, _, _ := box.state(); o != opened+1 {
		t.Errorf("the box served %d viewers after the tab showed again, want %d", o, opened+1)
	}

	if err := b.Go(ctx, w.a.URL+shares.PagePath+"#"+shares.SecretPrefix+strings.Repeat("0", 64)); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, "a guessed link's words", func(_, text string) bool {
		return strings.Contains(text, "This share link does not work")
	}); err != nil {
		t.Fatal(err)
	}
}
