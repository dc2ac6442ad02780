package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox/sandboxtest"
	"github.com/cocoonbox/cocoonbox/api/shares"
)

// Issue 43, Deliver 4 ("the console too"): in real Chromium the Boxes
// page refuses a share for 40 days beside the Days field, nothing made;
// makes a take-over share of main for 2 days and shows its link once (the
// api's share page with the secret as its fragment; the list's answer and
// the page reloaded hold it no more); shows the
// share's log (an open and a close of a viewer); asks before Revoke, Cancel
// keeping the share, and Revoke in the dialog ends the link.
func TestTheBoxesPageSharesAScreenAndRevokesIt(t *testing.T) {
	t.Parallel()
	sup := sandboxtest.New("cbdesk:v23-desk")
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	ctx := context.Background()
	if _, err := boxesAPI.Create(ctx, connect.NewRequest(&controlv1.CreateBoxRequest{RequestId: "shares-create", Name: "main", Image: "cbdesk:v23-desk"})); err != nil {
		t.Fatalf("create main: %v", err)
	}
	alice := a.SignIn("alice")
	list := func() []shares.ConsoleShare {
		t.Helper()
		resp, body := alice.Send("GET", "/cb/api/shares", "", "")
		var got struct{ Shares []shares.ConsoleShare }
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /cb/api/shares: %d %s", resp.StatusCode, body)
		}
		return got.Shares
	}

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.open("/cb/boxes")
	u.waitText("Running", "You have shared no screen yet")
	u.typeIn("#share-days", "40")
	u.click("#share-submit")
	u.waitText("Days: give 1 to 30 days")
	u.invalid("share-days")
	if got := list(); len(got) != 0 {
		t.Fatalf("a refused share was made: %+v", got)
	}

	u.clear("#share-days")
	u.typeIn("#share-days", "2")
	u.click("#share-take-over")
	u.click("#share-submit")
	u.waitText("shown once", "1 link works now", "Take over")
	var link string
	u.js(`return document.getElementById("share-link").textContent;`, &link)
	prefix := a.URL + shares.PagePath + "#" + shares.SecretPrefix
	if !strings.HasPrefix(link, prefix) || len(link) != len(prefix)-len(shares.SecretPrefix)+shares.SecretLen {
		t.Fatalf("the link shown: %q; want %s and the secret", link, prefix)
	}
	secret := link[strings.Index(link, "#")+1:]
	st := shares.NewStore(a.DB.Pool, nil)
	sh, err := st.Open(ctx, secret)
	if err != nil || sh.BoxName != "main" || sh.ViewOnly || sh.ExpiresAt.Sub(sh.CreatedAt).Hours() != 48 {
		t.Fatalf("the share the link opens: %+v, %v; want main's, take-over, 2 days", sh, err)
	}
	if resp, body := alice.Send("GET", "/cb/api/shares", "", ""); strings.Contains(body, secret) {
		t.Fatalf("the list's answer (%d) holds the secret", resp.StatusCode)
	}
	u.open("/cb/boxes")
	u.waitText("1 link works now")
	u.without(secret)

	// The log: a viewer opened the link and closed it.
	for _, e := range []shares.Event{{ShareID: sh.ID, Event: "open", Viewer: "v-1", Address: "192.0.2.7"},
		{ShareID: sh.ID, Event: "close", Viewer: "v-1", Address: "192.0.2.7", Reason: "the viewer left"}} {
		if err := st.Record(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	u.click(`#shares button[aria-label^="Log of the share of main"]`)
	u.waitText("Log of the share of main", "Opened", "Closed", "192.0.2.7", "the viewer left")

	u.click(`#shares button[aria-label^="Revoke the share of main"]`)
	u.waitFor("Revoke's question", `return document.getElementById("confirm").open;`)
	var title string
	u.js(`return document.getElementById("confirm-title").textContent;`, &title)
	if title != "Revoke the share of main?" {
		t.Errorf("Revoke asks %q", title)
	}
	u.click("#confirm-cancel")
	if _, err := st.Open(ctx, secret); err != nil {
		t.Fatalf("the link after Cancel: %v; want it working", err)
	}
	u.click(`#shares button[aria-label^="Revoke the share of main"]`)
	u.waitFor("Revoke's question", `return document.getElementById("confirm").open;`)
	u.click("#confirm-ok")
	u.waitText("Revoked", "0 links work now")
	if _, err := st.Open(ctx, secret); !errors.Is(err, shares.ErrNoShare) {
		t.Fatalf("the link after Revoke: %v; want it dead", err)
	}
	if got := list(); len(got) != 1 || got[0].Live || got[0].RevokedMs == 0 {
		t.Fatalf("the shares after Revoke: %+v", got)
	}
}

// sharesShown is the every-page suite's state of the Boxes page with a
// share's link just made and another share's log open
// (TestEveryPageInEveryState).
func sharesShown(u *ui) {
	u.click(`#shares button[aria-label^="Log of the share of main"]`)
	u.waitText("Log of the share of main")
	u.clear("#share-days")
	u.typeIn("#share-days", "1")
	u.click("#share-submit")
	u.waitText("shown once")
}
