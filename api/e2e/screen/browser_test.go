//go:build booted

package screen

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// signedInPage opens the console's screen page of alice's box desk in a
// fresh Chromium, through the console's sign-in it is sent to first.
func signedInPage(t *testing.T, ctx context.Context) *webdriver.Browser {
	t.Helper()
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Go(ctx, api.URL+"/cb/boxes/desk/screen"); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, "the sign-in form", func(_, text string) bool { return strings.Contains(text, "Sign in to cocoonbox") }); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{b.Type(ctx, "#user", "alice"), b.Type(ctx, "#password", password), b.Click(ctx, "#signin-submit")} {
		if step != nil {
			t.Fatal(step)
		}
	}
	if err := b.WaitFor(ctx, "the screen page, connected", func(url, text string) bool {
		return strings.HasSuffix(url, "/cb/boxes/desk/screen") && strings.Contains(text, "The screen of desk.")
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// canvas is the page's noVNC canvas as an image: its backing store is
// the box's framebuffer, 1280×800, whatever the scale it is shown at.
func canvas(ctx context.Context, b *webdriver.Browser) (*image.RGBA, error) {
	var url string
	if err := b.Execute(ctx, `const c = document.querySelector('#screen canvas'); return c ? c.toDataURL('image/png') : '';`, nil, &url); err != nil {
		return nil, err
	}
	data, ok := strings.CutPrefix(url, "data:image/png;base64,")
	if !ok {
		return nil, fmt.Errorf("the page has no canvas yet (%.40q)", url)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Rect, img, img.Bounds().Min, draw.Src)
	return rgba, nil
}

// Must show: real Chromium opens the console's screen page (noVNC from
// the api's own origin, under the page's strict CSP) against the booted
// desk box, and its frame equals the box's own screenshot of :0 within
// the tolerance (noVNC draws the cursor apart from the frame, so only the
// clock may differ). The control: the screenshot is not blank.
func TestScreenPageInChromiumShowsTheBoxsScreen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := signedInPage(t, ctx)
	wait.Eventually(t, 2*time.Minute, "the page's frame equal to the box's screenshot", func() (bool, string) {
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
		return d <= tolerance(shot.Rect), fmt.Sprintf("%d pixels differ (at most %d allowed); canvas %v, screenshot %v", d, tolerance(shot.Rect), frame.Rect, shot.Rect)
	})
}

// screensEnded counts the screens' WebSockets the api has ended (its
// request log's line of each, written when the call ends).
func screensEnded() int {
	n := 0
	for _, l := range strings.Split(api.Log(), "\n") {
		if strings.Contains(l, "path=/cb/api/boxes/desk/screen") && strings.Contains(l, "status=101") {
			n++
		}
	}
	return n
}

// Contract: Idle user boxes ("The share page does the same while its tab
// is hidden ..."): the page closes its screen when its tab is hidden (a
// second tab shown over it) and opens it again when it shows.
func TestScreenPageClosesItsScreenWhileTheTabIsHidden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := signedInPage(t, ctx)
	first, err := b.Window(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := screensEnded()
	if _, err := b.NewTab(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "the hidden tab's screen closed", func() (bool, string) {
		n := screensEnded()
		return n > before, fmt.Sprintf("%d screens ended since the tab was hidden", n-before)
	})
	if err := b.SwitchTo(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(ctx, "the screen open again", func(_, text string) bool { return strings.Contains(text, "The screen of desk.") }); err != nil {
		t.Fatal(err)
	}
}
