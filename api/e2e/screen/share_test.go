//go:build booted

package screen

import (
	"context"
	"fmt"
	"image"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	apiclient "github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/e2e/harness"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// x is how a command in the box reaches the desktop's X server as user.
const x = "env HOME=/home/user DISPLAY=:0 XAUTHORITY=/run/cocoonbox-x/Xauthority " +
	"XDG_RUNTIME_DIR=/run/user/1000 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus "

// Issue 43, Must show: real Chromium, a profile of its own holding only
// the link (no console session), opens a take-over share of alice's desk
// box; its first frame equals the box's own screenshot of :0, and
// "hello" typed through it lands in Mousepad in the box (Mousepad edits
// a file, saved by a Ctrl+S sent through Session.Screen, so its text is
// read from the disk). A view-only share's keys are the unit tests' (api/shares):
// a view-only phase here ("zq" typed first, the file then "hello" alone)
// passed with the filter letting KeyEvents through, so it proved nothing
// and is not kept (docs/screen.md, Not yet built).
func TestTheSharePageShowsTheBoxAndTakesInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	if _, err := harness.InBox(bridge, box, nil, "runuser -u user -- sh -c ': > /home/user/share.txt' && runuser -u user -- "+x+
		"setsid mousepad /home/user/share.txt >/dev/null 2>&1 </dev/null &"); err != nil {
		t.Fatal(err)
	}
	title := func() string {
		out, _ := harness.InBox(bridge, box, nil, x+"xwininfo -root -tree")
		var ls []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "share.txt") {
				ls = append(ls, strings.TrimSpace(l))
			}
		}
		return strings.Join(ls, "; ")
	}
	wait.Eventually(t, time.Minute, "Mousepad's window on share.txt", func() (bool, string) {
		l := title()
		return l != "", l
	})
	t.Cleanup(func() { harness.InBox(bridge, box, nil, "pkill -u user mousepad") })
	// The owner's own screen: a click into Mousepad's text gives it the
	// focus (a new window did not always have it: the keys typed through
	// the take-over share went nowhere in 2 of the first 6 runs), and
	// Ctrl+S at the end.
	c, err := dialScreen(ctx, aliceToken, "desk")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := dialRFB(c)
	if err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "Mousepad's window active (a click into it)", func() (bool, string) {
		for _, mask := range []byte{1, 0} {
			if _, err := c.Write([]byte{5, mask, 0, 200, 0, 200}); err != nil {
				return false, err.Error()
			}
		}
		active, _ := harness.InBox(bridge, box, nil, x+"xprop -root _NET_ACTIVE_WINDOW")
		// "_NET_ACTIVE_WINDOW(WINDOW): window id # 0x800003, 0x0"
		_, id, _ := strings.Cut(active, "# ")
		id, _, _ = strings.Cut(strings.TrimSpace(id), ",")
		w := title()
		return id != "" && strings.HasPrefix(w, id+" "), fmt.Sprintf("%s; Mousepad: %s", strings.TrimSpace(active), w)
	})

	var b *webdriver.Browser
	shares := controlv1connect.NewSharesClient(http.DefaultClient, api.URL, connect.WithInterceptors(apiclient.BearerInterceptor(aliceToken)))
	link := func(viewOnly bool) string {
		t.Helper()
		resp, err := shares.CreateShare(ctx, connect.NewRequest(&controlv1.CreateShareRequest{Box: "desk", ViewOnly: viewOnly, Days: 1}))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.Link
	}
	b, err = webdriver.Start(ctx) // a profile of its own: no cookie, only the link
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	open := func(url string) {
		t.Helper()
		if err := b.Go(ctx, url); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitFor(ctx, "the share page, connected", func(_, text string) bool { return strings.Contains(text, "A shared screen.") }); err != nil {
			t.Fatal(err)
		}
	}

	open(link(false))
	wait.Eventually(t, 2*time.Minute, "the share page's frame equal to the box's screenshot", func() (bool, string) {
		frame, err := canvas(ctx, b)
		if err != nil {
			return false, err.Error()
		}
		shot, err := screenshot(t)
		if err != nil {
			return false, err.Error()
		}
		if d := differing(shot, image.NewRGBA(shot.Rect)); d <= tolerance(shot.Rect) {
			return false, fmt.Sprintf("the screenshot is nearly black (%d pixels differ from black)", d)
		}
		d := differing(frame, shot)
		return d <= tolerance(shot.Rect), fmt.Sprintf("%d pixels differ (at most %d allowed)", d, tolerance(shot.Rect))
	})
	if err := b.Type(ctx, "#screen canvas", "hello"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "Mousepad's document changed through the take-over share", func() (bool, string) {
		l := title()
		return strings.Contains(l, `"*`), l
	})
	// Ctrl+S through the owner's own screen, then the file's text.
	for _, k := range []struct {
		sym  uint32
		down bool
	}{{0xffe3, true}, {'s', true}, {'s', false}, {0xffe3, false}} {
		if err := r.key(k.sym, k.down); err != nil {
			t.Fatal(err)
		}
	}
	var text string
	wait.Eventually(t, time.Minute, "share.txt saved with the typed text", func() (bool, string) {
		text, _ = harness.InBox(bridge, box, nil, "cat /home/user/share.txt")
		return strings.Contains(text, "hello"), fmt.Sprintf("share.txt holds %q", text)
	})
	if strings.TrimSpace(text) != "hello" {
		t.Errorf("share.txt holds %q, want \"hello\"", text)
	}
}
