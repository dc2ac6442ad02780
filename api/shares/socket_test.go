package shares_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/database/dbtest"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/session"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const boxID = "cb-00000000000000d1"

// vncHost is a box supervisor with one running desk box whose "VNC"
// (each Dial) sends an RFB banner and records every byte a viewer's side
// sends it: what reached the box. Any other call panics (its embedded
// nil Supervisor).
type vncHost struct {
	sandbox.Supervisor
	user string
	mu   sync.Mutex
	got  bytes.Buffer
	// rfb, when set, serves each Dial's box side in place of the banner
	// and the recording (a real RFB server's handshake: rfbServer).
	rfb func(box net.Conn)
	// asleep is set by Hibernate: the machine is hibernated from then on.
	asleep atomic.Bool
}

func (h *vncHost) state() sandbox.State {
	if h.asleep.Load() {
		return sandbox.Hibernated
	}
	return sandbox.Running
}

// Hibernate freezes the box: as the local supervisor's cgroup freezer,
// it leaves every relay connection open (and silent).
func (h *vncHost) Hibernate(_ context.Context, id string) (sandbox.Machine, error) {
	h.asleep.Store(true)
	return sandbox.Machine{ID: id, Tenant: h.user, State: sandbox.Hibernated}, nil
}

func (h *vncHost) Images(context.Context) ([]sandbox.Image, error) {
	return []sandbox.Image{{Ref: "cbdesk:v23-desk", Version: 23, Tier: "desk"}}, nil
}

func (h *vncHost) List(context.Context, string) ([]sandbox.Machine, error) {
	return []sandbox.Machine{{ID: boxID, Tenant: h.user, State: h.state()}}, nil
}

func (h *vncHost) Get(_ context.Context, id string) (sandbox.Machine, error) {
	return sandbox.Machine{ID: id, Tenant: h.user, State: h.state()}, nil
}

func (h *vncHost) SetClaimEnv(context.Context, string, []sandbox.ClaimEntry) error { return nil }

func (h *vncHost) Dial(_ context.Context, id string, port int) (net.Conn, error) {
	if id != boxID || port != 5900 {
		return nil, errors.New("no such port")
	}
	api, box := net.Pipe()
	if h.rfb != nil {
		go h.rfb(box)
		return api, nil
	}
	go func() {
		defer box.Close()
		if _, err := box.Write([]byte("RFB 003.008\n")); err != nil {
			return
		}
		buf := make([]byte, 4096)
		for {
			n, err := box.Read(buf)
			h.mu.Lock()
			h.got.Write(buf[:n])
			h.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return api, nil
}

// received waits until the box has n bytes from its viewers and answers them.
func (h *vncHost) received(t *testing.T, n int) []byte {
	t.Helper()
	var got []byte
	wait.Eventually(t, 30*time.Second, fmt.Sprintf("the box received %d bytes", n), func() (bool, string) {
		h.mu.Lock()
		got = append([]byte(nil), h.got.Bytes()...)
		h.mu.Unlock()
		return len(got) >= n, fmt.Sprintf("%d bytes: %q", len(got), got)
	})
	return got
}

func (h *vncHost) reset() {
	h.mu.Lock()
	h.got.Reset()
	h.mu.Unlock()
}

type world struct {
	a      *apitest.API
	host   *vncHost
	shares controlv1connect.SharesClient
	now    *atomic.Int64 // the api's clock's offset, ns
	ctx    context.Context
}

func newWorld(t *testing.T, opts ...apitest.Option) *world {
	t.Helper()
	w := &world{host: &vncHost{}, now: &atomic.Int64{}}
	clock := func() time.Time { return time.Now().Add(time.Duration(w.now.Load())) }
	w.a = apitest.New(t, append([]apitest.Option{apitest.WithSupervisor("host1", w.host), apitest.WithClock(clock)}, opts...)...)
	w.host.user = w.a.User.ID
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	w.ctx = ctx
	if _, err := w.a.DB.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
		VALUES ($1, $2, 'desk', 'cbdesk:v23-desk', 'running', 'host1', $3)`, boxID, w.a.User.ID, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	w.shares = controlv1connect.NewSharesClient(http.DefaultClient, w.a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(w.a.PersonalToken(w.a.User.ID)))))
	return w
}

func (w *world) create(t *testing.T, viewOnly bool) (*controlv1.Share, string) {
	t.Helper()
	resp, err := w.shares.CreateShare(w.ctx, connect.NewRequest(&controlv1.CreateShareRequest{Box: "desk", ViewOnly: viewOnly, Days: 1}))
	if err != nil {
		t.Fatalf("create a share: %v", err)
	}
	link := resp.Msg.Link
	prefix := w.a.URL + shares.PagePath + "#"
	if !strings.HasPrefix(link, prefix) {
		t.Fatalf("the link %q is not %s<secret>", link, prefix)
	}
	return resp.Msg.Share, strings.TrimPrefix(link, prefix)
}

// open opens the share's socket as the share page does (its own Origin,
// no cookie, the secret as the first message).
func (w *world) open(t *testing.T, secret string) *websocket.Conn {
	t.Helper()
	h := http.Header{"Origin": {w.a.URL}}
	ws, _, err := websocket.Dial(w.ctx, "ws"+strings.TrimPrefix(w.a.URL, "http")+"/cb/api/share/screen",
		&websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("open the share's socket: %v", err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if err := ws.Write(w.ctx, websocket.MessageText, []byte(secret)); err != nil {
		t.Fatalf("send the secret: %v", err)
	}
	return ws
}

// banner reads the box's RFB banner through ws: the share opened.
func banner(t *testing.T, ctx context.Context, ws *websocket.Conn) {
	t.Helper()
	_, b, err := ws.Read(ctx)
	if err != nil || string(b) != "RFB 003.008\n" {
		t.Fatalf("the share's screen: %q %v, want the box's banner", b, err)
	}
}

// closed waits for ws's close and answers its code and reason.
func closed(t *testing.T, ctx context.Context, ws *websocket.Conn) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("the socket ended with %v, not a close frame", err)
		}
		return ce.Code, ce.Reason
	}
}

var keyX = []byte{4, 1, 0, 0, 0, 0, 0, 'x'}
var updateRequest = []byte{3, 1, 0, 0, 0, 0, 5, 0, 3, 32}
var handshake = []byte("RFB 003.008\n\x01\x01")

// A view-only viewer's KeyEvent never reaches the box: the box receives
// its handshake and its FramebufferUpdateRequest and nothing between.
// The control: the same bytes through a take-over share reach the box
// with the KeyEvent.
func TestAViewOnlyViewersKeysNeverReachTheBox(t *testing.T) {
	w := newWorld(t)
	for _, viewOnly := range []bool{true, false} {
		w.host.reset()
		_, secret := w.create(t, viewOnly)
		ws := w.open(t, secret)
		banner(t, w.ctx, ws)
		for _, m := range [][]byte{handshake, keyX, updateRequest} {
			if err := ws.Write(w.ctx, websocket.MessageBinary, m); err != nil {
				t.Fatal(err)
			}
		}
		want := append(append([]byte{}, handshake...), updateRequest...)
		if !viewOnly {
			want = append(append(append([]byte{}, handshake...), keyX...), updateRequest...)
		}
		got := w.host.received(t, len(want))
		if !bytes.Equal(got, want) {
			t.Errorf("view-only %v: the box received %v, want %v", viewOnly, got, want)
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}
}

// The secret is shown once, in the link, and kept only as its SHA-256:
// no column of the share's row holds it. It is no token: as a Bearer on
// the Shares and Boxes services it is UNAUTHENTICATED, saying it is a
// share's secret.
func TestTheSecretIsHashedAtRestAndNoToken(t *testing.T) {
	w := newWorld(t)
	sh, secret := w.create(t, false)
	var row string
	var hash []byte
	if err := w.a.DB.Pool.QueryRow(w.ctx, `SELECT row_to_json(s)::text, secret_hash FROM box_shares s WHERE id = $1`, sh.Id).Scan(&row, &hash); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(secret)); !bytes.Equal(hash, sum[:]) {
		t.Errorf("the stored hash is not the secret's SHA-256")
	}
	if strings.Contains(row, secret) || strings.Contains(row, strings.TrimPrefix(secret, shares.SecretPrefix)) {
		t.Errorf("the share's row holds its secret: %s", row)
	}
	with := connect.WithInterceptors(client.BearerInterceptor(secret))
	_, err := controlv1connect.NewSharesClient(http.DefaultClient, w.a.URL, with).ListShares(w.ctx, connect.NewRequest(&controlv1.ListSharesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), "share link's secret") {
		t.Errorf("the secret as a Bearer on Shares: %v, want UNAUTHENTICATED naming the share secret", err)
	}
	_, err = controlv1connect.NewBoxesClient(http.DefaultClient, w.a.URL, with).List(w.ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the secret as a Bearer on Boxes: %v, want UNAUTHENTICATED", err)
	}
}

// A guessed, a malformed, a revoked, an expired secret and one of a
// deleted box each close the socket with CloseNoShare and the same words,
// leaking nothing of which;
// the share page is the same for every link (the server never sees the
// fragment) and runs under the strict policy. The control: the live
// secret opens the screen.
func TestALinkThatOpensNothingSaysNothingMore(t *testing.T) {
	w := newWorld(t)
	_, live := w.create(t, false)
	revoked, revokedSecret := w.create(t, false)
	if _, err := w.shares.RevokeShare(w.ctx, connect.NewRequest(&controlv1.RevokeShareRequest{Id: revoked.Id})); err != nil {
		t.Fatal(err)
	}
	banner(t, w.ctx, w.open(t, live))
	// A second box, shared and then deleted.
	if _, err := w.a.DB.Pool.Exec(w.ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed)
		VALUES ('cb-00000000000000d2', $1, 'gone', 'cbdesk:v23-desk', 'running', 'host1', $2)`, w.a.User.ID, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	resp, err := w.shares.CreateShare(w.ctx, connect.NewRequest(&controlv1.CreateShareRequest{Box: "gone"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.a.DB.Pool.Exec(w.ctx, `DELETE FROM boxes WHERE id = 'cb-00000000000000d2'`); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for what, secret := range map[string]string{
		"guessed":         shares.SecretPrefix + strings.Repeat("0", 64),
		"malformed":       "cbs_nope",
		"revoked":         revokedSecret,
		"its box deleted": strings.TrimPrefix(resp.Msg.Link, w.a.URL+shares.PagePath+"#"),
	} {
		code, why := closed(t, w.ctx, w.open(t, secret))
		if code != shares.CloseNoShare {
			t.Errorf("%s: close %d %q, want %d", what, code, why, shares.CloseNoShare)
		}
		reasons[why] = what
	}
	w.now.Store(int64(25 * time.Hour)) // the shares are of one day
	code, why := closed(t, w.ctx, w.open(t, live))
	if code != shares.CloseNoShare {
		t.Errorf("expired: close %d %q, want %d", code, why, shares.CloseNoShare)
	}
	reasons[why] = "expired"
	if len(reasons) != 1 {
		t.Errorf("the links that open nothing say different things: %v", reasons)
	}
	page, body := w.a.Browser().Send("GET", shares.PagePath, "", "")
	if page.StatusCode != http.StatusOK || !strings.Contains(body, `src="/cb/screen/share.js"`) ||
		!strings.Contains(page.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("the share page: %d %q %s", page.StatusCode, page.Header.Get("Content-Security-Policy"), body)
	}
}

// Revoking a share ends its open viewer at once with CloseShareEnded, and
// its owner's sign out everywhere ends another's (the share stays); the
// audit log has each open and close with its reason, newest first.
func TestRevokeAndSignOutEverywhereEndAnOpenViewer(t *testing.T) {
	w := newWorld(t)
	sh, secret := w.create(t, true)
	ws := w.open(t, secret)
	banner(t, w.ctx, ws)
	if _, err := w.shares.RevokeShare(w.ctx, connect.NewRequest(&controlv1.RevokeShareRequest{Id: sh.Id})); err != nil {
		t.Fatal(err)
	}
	if code, why := closed(t, w.ctx, ws); code != shares.CloseShareEnded || !strings.Contains(why, "revoked") {
		t.Errorf("the revoked share's viewer: close %d %q, want %d, revoked", code, why, shares.CloseShareEnded)
	}

	sh2, secret2 := w.create(t, false)
	ws = w.open(t, secret2)
	banner(t, w.ctx, ws)
	if resp, body := w.a.Session.Send("POST", "/cb/api/me/sign-out-everywhere", "application/json", "{}"); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign out everywhere: %d %s", resp.StatusCode, body)
	}
	if code, why := closed(t, w.ctx, ws); code != shares.CloseShareEnded || !strings.Contains(why, "signed out everywhere") {
		t.Errorf("sign out everywhere: the viewer closed %d %q, want %d", code, why, shares.CloseShareEnded)
	}

	token := string(w.a.PersonalToken(w.a.User.ID)) // sign out everywhere revoked the old one
	owner := controlv1connect.NewSharesClient(http.DefaultClient, w.a.URL, connect.WithInterceptors(client.BearerInterceptor(token)))
	log, err := owner.ShareLog(w.ctx, connect.NewRequest(&controlv1.ShareLogRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log.Msg.Events {
		got = append(got, e.ShareId+" "+e.Event+" "+e.Reason)
		if e.Viewer == "" || e.Address == "" || e.AtMs == 0 {
			t.Errorf("a log line without its viewer, address or time: %+v", e)
		}
	}
	want := []string{sh2.Id + " close the owner signed out everywhere", sh2.Id + " open ",
		sh.Id + " close the share was revoked", sh.Id + " open "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	list, err := owner.ListShares(w.ctx, connect.NewRequest(&controlv1.ListSharesRequest{}))
	if err != nil || len(list.Msg.Shares) != 2 || list.Msg.Shares[0].RevokedAtMs != 0 || list.Msg.Shares[1].RevokedAtMs == 0 {
		t.Errorf("after sign out everywhere the shares stay, the revoked one marked: %v %v", list, err)
	}
}

// A live share of a box that is not running closes with the screen's
// CloseNotRunning, which the page turns into "ask its owner to wake it":
// the link works, the box sleeps (the screen does not wake a box).
func TestAShareOfAHibernatedBoxSaysItSleeps(t *testing.T) {
	w := newWorld(t)
	_, secret := w.create(t, true)
	if _, err := w.a.DB.Pool.Exec(w.ctx, `UPDATE boxes SET state = 'hibernated' WHERE id = $1`, boxID); err != nil {
		t.Fatal(err)
	}
	if code, why := closed(t, w.ctx, w.open(t, secret)); code != session.CloseNotRunning {
		t.Errorf("a hibernated box's share: close %d %q, want %d", code, why, session.CloseNotRunning)
	}
}

// A revoke served by one api ends the share's viewer open on another api
// of the same database (Follow: the revoke is NOTIFYed), at once.
func TestARevokeOnOneApiEndsAViewerOnAnother(t *testing.T) {
	w := newWorld(t)
	other := apitest.New(t, apitest.WithDatabaseOf(w.a), apitest.WithSupervisor("host1", w.host))
	sh, secret := w.create(t, true)
	h := http.Header{"Origin": {other.URL}}
	ws, _, err := websocket.Dial(w.ctx, "ws"+strings.TrimPrefix(other.URL, "http")+"/cb/api/share/screen",
		&websocket.DialOptions{HTTPHeader: h, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(w.ctx, websocket.MessageText, []byte(secret)); err != nil {
		t.Fatal(err)
	}
	banner(t, w.ctx, ws)
	if _, err := w.shares.RevokeShare(w.ctx, connect.NewRequest(&controlv1.RevokeShareRequest{Id: sh.Id})); err != nil {
		t.Fatal(err)
	}
	if code, why := closed(t, w.ctx, ws); code != shares.CloseShareEnded || !strings.Contains(why, "revoked") {
		t.Errorf("the other api's viewer: close %d %q, want %d, revoked", code, why, shares.CloseShareEnded)
	}
}
