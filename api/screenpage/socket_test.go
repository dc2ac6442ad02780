package screenpage_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/wire"
	"github.com/cocoonbox/cocoonbox/api/session"
)

// The socket the page opens (session.ScreenSocketPath), as the api
// serves it without a box supervisor: a foreign Origin and none are 403
// and a browser without a session 401, all before the upgrade; a signed-in
// page's own origin is upgraded and then closed with CloseUnavail and the
// reason, since no supervisor answers. The booted tests
// (api/e2e/screen) show the rest against a desk box.
func TestTheScreenSocketsChecksBeforeAnyBox(t *testing.T) {
	a := apitest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "ws" + strings.TrimPrefix(a.URL, "http") + "/cb/api/boxes/desk/screen"
	dial := func(c *http.Client, origin string) (*websocket.Conn, int, error) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: c, HTTPHeader: h, Subprotocols: []string{"binary"}})
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return ws, status, err
	}
	for _, c := range []struct {
		client *http.Client
		origin string
		want   int
	}{
		{a.Session.Client, "http://evil.example", http.StatusForbidden},
		{a.Session.Client, "", http.StatusForbidden},
		{a.Browser().Client, a.URL, http.StatusUnauthorized},
	} {
		ws, status, err := dial(c.client, c.origin)
		if err == nil {
			ws.CloseNow()
		}
		if status != c.want {
			t.Errorf("Origin %q: %d %v, want %d", c.origin, status, err, c.want)
		}
	}
	ws, status, err := dial(a.Session.Client, a.URL)
	if err != nil {
		t.Fatalf("the page's own origin, signed in: %d %v", status, err)
	}
	defer ws.CloseNow()
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != session.CloseUnavail || ce.Reason == "" {
		t.Fatalf("without a supervisor the socket ended with %v, want close %d and a reason", err, session.CloseUnavail)
	}
}

// Session.Screen answers before any box: no token and an agent's cba_
// token UNAUTHENTICATED (Contract: What a grant reaches, the screen
// answers it as a bad token), the user's own token UNAVAILABLE here (no
// supervisor), a first message that is not start INVALID_ARGUMENT.
func TestSessionScreenChecksItsCaller(t *testing.T) {
	a := apitest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	personal := string(a.PersonalToken(a.User.ID))
	screen := func(token string, first *controlv1.SessionScreenRequest) error {
		s := controlv1connect.NewSessionClient(wire.H2CClient("", token, 0), a.URL, connect.WithGRPC()).Screen(ctx)
		defer s.CloseRequest()
		_ = s.Send(first)
		_, err := s.Receive()
		return err
	}
	start := &controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Start{Start: &controlv1.SessionScreenStart{Box: "desk"}}}
	for _, c := range []struct {
		what  string
		token string
		first *controlv1.SessionScreenRequest
		want  connect.Code
	}{
		{"no token", "", start, connect.CodeUnauthenticated},
		{"an agent's token", "cba_" + strings.Repeat("a", 64), start, connect.CodeUnauthenticated},
		{"data first", personal, &controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Data{Data: []byte("RFB")}}, connect.CodeInvalidArgument},
		{"the user's token, no supervisor", personal, start, connect.CodeUnavailable},
	} {
		if err := screen(c.token, c.first); connect.CodeOf(err) != c.want {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}
}
