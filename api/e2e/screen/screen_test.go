//go:build booted

package screen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// screenshot is the box's own screenshot of :0, taken inside the box
// (xwd of the root window, as make demo takes it), as RGBA.
func screenshot(t testing.TB) (*image.RGBA, error) {
	t.Helper()
	out, err := harness.InBox(bridge, box, nil,
		"env DISPLAY=:0 XAUTHORITY=/run/cocoonbox-x/Xauthority xwd -root -silent | convert xwd:- ppm:-")
	if err != nil {
		return nil, err
	}
	return readPPM([]byte(out))
}

// readPPM reads a binary PPM (P6, maxval 255; Netpbm's header: four
// fields apart by whitespace, # comments to the line's end).
func readPPM(b []byte) (*image.RGBA, error) {
	var f [4]string
	i := 0
	for n := 0; n < 4; n++ {
		for i < len(b) && (b[i] == '#' || b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			if b[i] == '#' {
				for i < len(b) && b[i] != '\n' {
					i++
				}
				continue
			}
			i++
		}
		j := i
		for j < len(b) && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		f[n], i = string(b[i:j]), j+1 // one whitespace ends the header
	}
	w, errW := strconv.Atoi(f[1])
	h, errH := strconv.Atoi(f[2])
	if f[0] != "P6" || f[3] != "255" || errW != nil || errH != nil || w <= 0 || h <= 0 {
		return nil, fmt.Errorf("not a P6 PPM of maxval 255: header %q, begins %q", f, b[:min(len(b), 48)])
	}
	if len(b)-i < 3*w*h {
		return nil, fmt.Errorf("the PPM's pixels: %d of %d bytes", len(b)-i, 3*w*h)
	}
	px := b[i:]
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for k := 0; k < w*h; k++ {
		img.Pix[4*k], img.Pix[4*k+1], img.Pix[4*k+2], img.Pix[4*k+3] = px[3*k], px[3*k+1], px[3*k+2], 255
	}
	return img, nil
}

// differing counts the pixels of a and b whose colour differs by more than
// 16 in any channel (the same size, else every pixel).
func differing(a, b *image.RGBA) int {
	if a.Rect != b.Rect {
		return a.Rect.Dx() * a.Rect.Dy()
	}
	n := 0
	for i := 0; i < len(a.Pix); i += 4 {
		for c := 0; c < 3; c++ {
			d := int(a.Pix[i+c]) - int(b.Pix[i+c])
			if d > 16 || d < -16 {
				n++
				break
			}
		}
	}
	return n
}

// tolerance is how many pixels a frame may differ from the screenshot by:
// 0.5% of the screen, room for the cursor (drawn into the frame, not into
// xwd's) and the panel's clock ticking between the two.
func tolerance(r image.Rectangle) int { return r.Dx() * r.Dy() / 200 }

// Must show: an RFB client through `cocoonbox screen` (a device token)
// completes the handshake and reads a full frame equal to the box's own
// screenshot of :0, within the tolerance. The control: the screenshot is
// not a blank screen, so a frame of nothing could not pass.
func TestScreenThroughTheCLIEqualsTheBoxsOwnScreenshot(t *testing.T) {
	port := screenCLI(t, aliceToken, "desk")
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := dialRFB(conn)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width != 1280 || c.Height != 800 {
		t.Errorf("the screen is %dx%d, want the desktop's 1280x800", c.Width, c.Height)
	}
	wait.Eventually(t, 2*time.Minute, "a full frame equal to the box's screenshot", func() (bool, string) {
		frame, err := c.fullFrame()
		if err != nil {
			t.Fatalf("read a full frame: %v", err)
		}
		shot, err := screenshot(t)
		if err != nil {
			return false, err.Error()
		}
		blank := image.NewRGBA(shot.Rect)
		if d := differing(shot, blank); d <= tolerance(shot.Rect) {
			return false, fmt.Sprintf("the screenshot is nearly black (%d pixels differ from black): the desktop is not up", d)
		}
		d := differing(frame, shot)
		return d <= tolerance(shot.Rect), fmt.Sprintf("%d pixels differ (at most %d allowed); frame %v, screenshot %v", d, tolerance(shot.Rect), frame.Rect, shot.Rect)
	})
}

// streamConn is a Session.Screen past connected as a net.Conn, for the
// RFB client; Read answers the call's error once it ends.
type streamConn struct {
	net.Conn // nil: only Read, Write and Close are used
	s        *connect.BidiStreamForClient[controlv1.SessionScreenRequest, controlv1.SessionScreenResponse]
	cancel   context.CancelFunc
	buf      []byte
}

func (c *streamConn) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		m, err := c.s.Receive()
		if err != nil {
			return 0, err
		}
		c.buf = m.GetData()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) {
	err := c.s.Send(&controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Data{Data: bytes.Clone(p)}})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *streamConn) Close() error {
	c.s.CloseRequest()
	c.cancel()
	return nil
}

// dialScreen opens Session.Screen on box with token: the call's error
// before connected, else the stream as a net.Conn.
func dialScreen(ctx context.Context, token, box string) (*streamConn, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := client(token).Screen(ctx)
	_ = s.Send(&controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Start{Start: &controlv1.SessionScreenStart{Box: box}}})
	first, err := s.Receive()
	if err == nil && !first.GetConnected() {
		err = errors.New("the first answer is not connected")
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &streamConn{s: s, cancel: cancel}, nil
}

// openScreen opens Session.Screen on alice's box with token and completes
// the RFB handshake through it. Every test screen completes it: the box's
// VNC refuses its loopback for a while after five connections that end
// before it (docs/screen.md, TigerVNC's BlacklistThreshold).
func openScreen(t testing.TB, ctx context.Context, token string) *streamConn {
	t.Helper()
	c, err := dialScreen(ctx, token, "desk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dialRFB(c); err != nil {
		t.Fatalf("the RFB handshake through Session.Screen: %v", err)
	}
	return c
}

// screenError opens Session.Screen on box with token and answers how it
// failed (nil when it connected and the RFB handshake went through).
func screenError(ctx context.Context, token, box string) error {
	c, err := dialScreen(ctx, token, box)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = dialRFB(c)
	return err
}

// ended waits for c's call to end and answers its error.
func ended(t testing.TB, c *streamConn) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		b := make([]byte, 4096)
		for {
			if _, err := c.Read(b); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the screen was still open a minute after its credential ended")
		return nil
	}
}

// Contract: Browser sign-in and device tokens ("Every call still open on
// a revoked or replaced token ... ends with it"; device tokens work on
// "the screen"). A device token opens the screen; revoking it ends the
// open stream, UNAUTHENTICATED.
func TestScreenEndsWhenItsDeviceTokenIsRevoked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tok, _ := newDevice(t, "alice", "revoked-screen")
	s := openScreen(t, ctx, tok)
	revoke(t, tok)
	if err := ended(t, s); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("the screen of a revoked device ended with %v, want UNAUTHENTICATED", err)
	}
	if err := screenError(ctx, tok, "desk"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a new screen on the revoked token: %v, want UNAUTHENTICATED", err)
	}
}

// Contract: OAuth for agents, "What a grant reaches": the user-token
// check never maps a cba_ token to a user, so the screen answers it as a
// bad token. The control: alice's device token on the same box connects.
func TestScreenRefusesAnAgentsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := harness.SignIn(ctx, api.URL, "alice", password)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := c.Agent(ctx, "screen-agent", 1, 1)
	if err != nil || !strings.HasPrefix(agent, "cba_") {
		t.Fatalf("an agent's token: %q, %v", agent, err)
	}
	if err := screenError(ctx, agent, "desk"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("a cba_ token on the user's box: %v, want UNAUTHENTICATED", err)
	}
	if err := screenError(ctx, aliceToken, "desk"); err != nil {
		t.Errorf("the control, alice's device token: %v", err)
	}
}

// Owner only: another user's box is NOT_FOUND, as for Session.Exec.
func TestScreenOfAnotherUsersBoxIsNotFound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"desk", box} {
		if err := screenError(ctx, bobToken, name); connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("bob on alice's box %s: %v, want NOT_FOUND", name, err)
		}
	}
}

// wsURL is the WebSocket form's URL of alice's box.
func wsURL() string {
	return "ws" + strings.TrimPrefix(api.URL, "http") + strings.Replace(strings.TrimPrefix(session.ScreenSocketPath, "GET "), "{box}", "desk", 1)
}

// dialWS opens the WebSocket form with the console c's cookie and origin.
func dialWS(ctx context.Context, c *harness.Console, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	ws, resp, err := websocket.Dial(ctx, wsURL(), &websocket.DialOptions{HTTPClient: c.Client, HTTPHeader: h, Subprotocols: []string{"binary"}})
	if ws != nil {
		ws.SetReadLimit(1 << 20)
	}
	return ws, resp, err
}

// openWS opens the WebSocket form with the console c and completes the
// RFB handshake through it.
func openWS(t testing.TB, ctx context.Context, c *harness.Console) net.Conn {
	t.Helper()
	ws, _, err := dialWS(ctx, c, api.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	if _, err := dialRFB(nc); err != nil {
		t.Fatalf("the RFB handshake through the WebSocket: %v", err)
	}
	return nc
}

// The WebSocket form for browsers: the console session's cookie opens it
// from the api's own origin and carries RFB; another origin (a page of
// another site, whose WebSocket the cookie would go along with) or none
// is refused 403 before the upgrade; the console's sign-out ends it.
func TestScreenWebSocketChecksOriginAndEndsWithTheSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, c := newDevice(t, "alice", "ws")
	for _, origin := range []string{"http://evil.example", ""} {
		ws, resp, err := dialWS(ctx, c, origin)
		if err == nil {
			ws.CloseNow()
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %q: %v %v, want 403", origin, resp, err)
		}
	}
	nc := openWS(t, ctx, c)
	if status, body, err := c.Do(ctx, "DELETE", "/cb/api/session", nil); err != nil || status != http.StatusNoContent {
		t.Fatalf("sign out: %d %s %v", status, body, err)
	}
	_, err := nc.Read(make([]byte, 64))
	if websocket.CloseStatus(err) != session.CloseEnded {
		t.Fatalf("after the sign-out the WebSocket ended with %v, want close %d", err, session.CloseEnded)
	}
}

// Docs/screen.md: the screen does not wake a box. A screen open when the
// box is hibernated closes (issue 43, Deliver 5: the frozen box keeps its
// relay connection open and silent, so the api follows the box's state),
// Session.Screen FAILED_PRECONDITION and the WebSocket 4409. A hibernated
// box's screen is FAILED_PRECONDITION naming the state; once it is woken,
// the screen opens again.
func TestScreenOfAHibernatedBoxIsRefusedUntilItWakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	open := openScreen(t, ctx, aliceToken)
	_, c := newDevice(t, "alice", "hibernate")
	nc := openWS(t, ctx, c)
	wsEnded := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, nc); wsEnded <- err }()
	bx := harness.Boxes(api.URL, aliceToken)
	if _, err := bx.Hibernate(ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: "screen-hibernate", Box: "desk"})); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, open); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("the screen open when the box was hibernated ended with %v, want FAILED_PRECONDITION", err)
	}
	select {
	case err := <-wsEnded:
		if websocket.CloseStatus(err) != session.CloseNotRunning {
			t.Errorf("the WebSocket open when the box was hibernated ended with %v, want close %d", err, session.CloseNotRunning)
		}
	case <-time.After(time.Minute):
		t.Error("the WebSocket was still open a minute after its box was hibernated")
	}
	if err := api.WaitBox(ctx, aliceToken, "desk", controlv1.BoxState_BOX_STATE_HIBERNATED); err != nil {
		t.Fatal(err)
	}
	err := screenError(ctx, aliceToken, "desk")
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "hibernated") {
		t.Errorf("the screen of a hibernated box: %v, want FAILED_PRECONDITION naming the state", err)
	}
	if _, err := bx.Ensure(ctx, connect.NewRequest(&controlv1.EnsureBoxRequest{RequestId: "screen-wake", Box: "desk"})); err != nil {
		t.Fatal(err)
	}
	if err := api.WaitBox(ctx, aliceToken, "desk", controlv1.BoxState_BOX_STATE_RUNNING); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "the screen after the wake", func() (bool, string) {
		err := screenError(ctx, aliceToken, "desk")
		return err == nil, fmt.Sprint(err)
	})
}

// Contract: Sign out everywhere ("every call open on any of them"; "A
// named share's screen open in the console ends with its viewer too"):
// a Session.Screen on a device token and a console WebSocket both end.
// Last: alice gets a new device token for what runs after.
func TestScreenSignOutEverywhereEndsEveryOpenScreen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tok, c := newDevice(t, "alice", "everywhere")
	s := openScreen(t, ctx, tok)
	nc := openWS(t, ctx, c)
	if status, body, err := c.Post(ctx, "/cb/api/me/sign-out-everywhere", map[string]any{}); err != nil || status != http.StatusNoContent {
		t.Fatalf("sign out everywhere: %d %s %v", status, body, err)
	}
	if err := ended(t, s); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the device's screen ended with %v, want UNAUTHENTICATED", err)
	}
	if _, err := nc.Read(make([]byte, 64)); websocket.CloseStatus(err) != session.CloseEnded {
		t.Errorf("the console's screen ended with %v, want close %d", err, session.CloseEnded)
	}
	aliceToken, _ = newDevice(t, "alice", "after-everywhere")
}
