package shares_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/shares"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// The owner's page and the share page live in package screenpage; their
// Chromium tests are here, beside the fake box (rfbServer, vncHost) the
// share page's test has.

// clipboardJS answers the clipboard area's text and whether it is read-only.
const clipboardJS = `const a = document.getElementById('clipboard'); return [a.value, String(a.readOnly)];`

func clipboardShows(t *testing.T, ctx context.Context, b *webdriver.Browser, want string) {
	t.Helper()
	wait.Eventually(t, time.Minute, "the page's clipboard area showing the box's clipboard", func() (bool, string) {
		var got []string
		if err := b.Execute(ctx, clipboardJS, nil, &got); err != nil || len(got) != 2 {
			return false, fmt.Sprintf("%q %v", got, err)
		}
		return got[0] == want, fmt.Sprintf("%q", got[0])
	})
}

// leave leaves the page and waits until the box saw every viewer go, so
// every byte a viewer sent has passed the relay.
func leave(t *testing.T, ctx context.Context, b *webdriver.Browser, box *rfbServer) {
	t.Helper()
	if err := b.Go(ctx, "about:blank"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, time.Minute, "the viewer gone from the box", func() (bool, string) {
		opened, ended, _, _ := box.state()
		return opened == ended, fmt.Sprintf("%d opened, %d ended", opened, ended)
	})
}

func (s *rfbServer) cutTexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cuts...)
}

// Issue 43, Deliver 3: the owner's screen page (/cb/boxes/NAME/screen)
// in real Chromium, 390 px wide: the box's ServerCutText shows in the
// page's clipboard area; text written there reaches the box as a
// ClientCutText when the area loses focus; the 1280×800 desktop is
// scaled to fit the window (noVNC's scaleViewport) and the page is no
// wider than the window, which is a phone's 390 px (the page's viewport
// meta: without it a phone lays the page out 980 px wide).
func TestTheScreenPagesClipboardAndFitInChromium(t *testing.T) {
	w := newWorld(t)
	box := &rfbServer{width: 1280, height: 800, cut: "from the box"}
	ctx, b := chromium(t, w, box)
	if err := b.Emulate(ctx, 390, 844, false); err != nil {
		t.Fatal(err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("open the sign-in", b.Go(ctx, w.a.URL+"/cb/"))
	step("type the user", b.Type(ctx, "#user", "alice"))
	step("type the password", b.Type(ctx, "#password", apitest.Password))
	step("sign in", b.Click(ctx, "#signin-submit"))
	step("signed in", b.WaitFor(ctx, "the console", func(_, text string) bool { return strings.Contains(text, "Hello, alice") }))
	step("open the screen page", b.Go(ctx, w.a.URL+"/cb/boxes/desk/screen"))
	step("the screen", b.WaitFor(ctx, "the screen connected", func(_, text string) bool { return strings.Contains(text, "The screen of desk.") }))

	clipboardShows(t, ctx, b, "from the box")

	wait.Eventually(t, time.Minute, "the desktop scaled into 390 px", func() (bool, string) {
		var m map[string]float64
		err := b.Execute(ctx, `const c = document.querySelector('#screen canvas').getBoundingClientRect();
			return {canvas: c.width, right: c.right, inner: innerWidth, page: document.documentElement.scrollWidth};`, nil, &m)
		return err == nil && m["inner"] == 390 && m["canvas"] > 0 && m["right"] <= m["inner"] && m["page"] <= m["inner"], fmt.Sprintf("%v %v", m, err)
	})

	step("clear the area", b.Execute(ctx, `document.getElementById('clipboard').value = ''; return null;`, nil, nil))
	step("write into the area", b.Type(ctx, "#clipboard", "to the box"))
	step("leave the area", b.Click(ctx, "#screen-state"))
	wait.Eventually(t, time.Minute, "the area's text at the box", func() (bool, string) {
		cuts := box.cutTexts()
		return len(cuts) > 0 && cuts[len(cuts)-1] == "to the box", fmt.Sprintf("ClientCutTexts %q", cuts)
	})
}

// Issue 43, Deliver 3 and 4: the share page shows the box's clipboard
// but offers no sending, take-over or view-only (it cannot tell which;
// the api drops a view-only viewer's ClientCutText whatever a page
// sends): its area is read-only, and text put there and changed reaches
// no box, not even through a take-over share, whose relay would pass it.
func TestTheSharePageNeverSendsTheClipboard(t *testing.T) {
	w := newWorld(t)
	box := &rfbServer{cut: "from the box"}
	ctx, b := chromium(t, w, box)
	for _, viewOnly := range []bool{false, true} {
		_, secret := w.create(t, viewOnly)
		if err := b.Go(ctx, w.a.URL+shares.PagePath+"#"+secret); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitFor(ctx, "the share's screen", func(_, text string) bool { return strings.Contains(text, "A shared screen.") }); err != nil {
			t.Fatal(err)
		}
		clipboardShows(t, ctx, b, "from the box")
		var got []string
		if err := b.Execute(ctx, `const area = document.getElementById('clipboard');
			area.value = 'to the box'; area.dispatchEvent(new Event('change'));`+clipboardJS, nil, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1] != "true" {
			t.Errorf("view-only %v: the share page's clipboard area is not read-only: %q", viewOnly, got)
		}
		leave(t, ctx, b, box)
		if cuts := box.cutTexts(); len(cuts) != 0 {
			t.Fatalf("view-only %v: the box got ClientCutTexts %q from a share page", viewOnly, cuts)
		}
	}
}
