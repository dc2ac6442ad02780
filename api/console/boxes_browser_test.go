package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
)

// Issue 43, Deliver 3: in real Chromium the Boxes page shows a running
// box made through the Boxes API (as the CLI makes one) with its screen's
// link and the upgrade notice the Boxes service gives; Hibernate shows the
// operation under way while the supervisor holds it, then the box
// hibernated, without a reload; Delete asks first with the CLI's words,
// Cancel keeps the box, and Delete in the dialog removes it.
func TestTheBoxesPageHibernatesAndDeletesABox(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk", "cbdesk:v24-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	ctx := context.Background()
	if _, err := boxesAPI.Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "boxes-page-create", Name: "main", Image: "cbdesk:v23-desk"})); err != nil {
		t.Fatalf("create main: %v", err)
	}

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.open("/cb/boxes")
	u.waitText("Running", "A newer image, cbdesk:v24-desk, is out")
	u.without("Being made now")
	var href string
	u.js(`return document.querySelector('a[aria-label="Screen of main"]').getAttribute("href");`, &href)
	if href != "/cb/boxes/main/screen" {
		t.Errorf("main's screen link is %q, want /cb/boxes/main/screen", href)
	}

	release := sup.Hold()
	defer release()
	u.click(`button[aria-label="Hibernate main"]`)
	u.waitText("Hibernating now")
	release()
	u.waitText("Hibernated")
	u.without("Hibernating now")
	if resp, err := boxesAPI.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: "main"})); err != nil ||
		resp.Msg.Box.State != controlv1.BoxState_BOX_STATE_HIBERNATED {
		t.Fatalf("main after Hibernate: %v, %v", resp, err)
	}

	u.click(`button[aria-label="Delete main"]`)
	u.waitFor("Delete's confirmation", `return document.getElementById("confirm").open;`)
	var dialog struct{ Title, Text string }
	u.js(`return { title: document.getElementById("confirm-title").textContent, text: document.getElementById("confirm-text").textContent };`, &dialog)
	if dialog.Title != "Delete main?" || !strings.Contains(dialog.Text, "for good, keeping only its newest save") {
		t.Errorf("Delete asks %q: %q; want the CLI's confirmation", dialog.Title, dialog.Text)
	}
	u.click("#confirm-cancel")
	if resp, err := boxesAPI.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{})); err != nil || len(resp.Msg.Boxes) != 1 {
		t.Fatalf("after Cancel: %v, %v; want main kept", resp, err)
	}
	u.click(`button[aria-label="Delete main"]`)
	u.waitFor("Delete's confirmation again", `return document.getElementById("confirm").open;`)
	u.click("#confirm-ok")
	u.waitText("You have no boxes yet")
	if resp, err := boxesAPI.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{})); err != nil || len(resp.Msg.Boxes) != 0 {
		t.Fatalf("after Delete: %v, %v; want no boxes", resp, err)
	}
}

// Issue 43, Deliver 3: the Boxes page's form makes a box through the
// Boxes service, as box create does: a bad name and a taken one are
// refused beside the field, nothing made; a good one shows Starting, then
// Running, without a reload.
func TestTheBoxesPageMakesABox(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	u := newUI(t, a.URL)
	u.signIn("alice")
	u.open("/cb/boxes")
	u.waitText("You have no boxes yet")
	u.typeIn("#name", "Not OK")
	u.click("#make-submit")
	u.waitText("Name: use 1 to 63 lower-case letters")
	var invalid string
	u.js(`return document.getElementById("name").getAttribute("aria-invalid") || "";`, &invalid)
	if invalid != "true" {
		t.Errorf("the bad name's field is not marked invalid (%q)", invalid)
	}
	release := sup.Hold()
	defer release()
	u.clear("#name")
	u.typeIn("#name", "demo")
	u.click("#make-submit")
	u.waitText("Being made now")
	release()
	u.waitText("Running")
	u.without("Being made now")
	u.typeIn("#name", "demo")
	u.click("#make-submit")
	u.waitText("you have a box called demo already")
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	resp, err := boxesAPI.List(context.Background(), connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if err != nil || len(resp.Msg.Boxes) != 1 || resp.Msg.Boxes[0].Name != "demo" || resp.Msg.Boxes[0].State != controlv1.BoxState_BOX_STATE_RUNNING {
		t.Fatalf("the boxes after making demo: %v, %v; want demo running alone", resp, err)
	}
}

// without waits, for 30 s at most, until the page's text no longer holds s.
func (u *ui) without(s string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	u.step("wait for "+s+" to go", u.b.WaitFor(ctx, "no "+s, func(_, text string) bool { return !strings.Contains(text, s) }))
}
