package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/devices"
	"github.com/cocoonbox/cocoonbox/api/oauth"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
)

// savesSlowly is a box supervisor whose saves run until the test ends,
// so the api holds a save under way. It answers what the boxes service
// asks of hibernated boxes (Get, List, Images, Save, and SetClaimEnv
// on each key added); any other call
// panics (its embedded nil Supervisor), which this test must not make.
type savesSlowly struct {
	sandbox.Supervisor
	saving chan string   // the machine id of each save begun
	done   chan struct{} // closed at the test's end: the saves return
}

func (s savesSlowly) Images(context.Context) ([]sandbox.Image, error) {
	// v24-desk: main (v23-desk) has an upgrade, which the Boxes page tells.
	return []sandbox.Image{{Ref: "cbdesk:v23-desk", Version: 23, Tier: "desk"}, {Ref: "cbdesk:v24-desk", Version: 24, Tier: "desk"}}, nil
}

func (s savesSlowly) List(context.Context, string) ([]sandbox.Machine, error) { return nil, nil }

func (s savesSlowly) Get(_ context.Context, id string) (sandbox.Machine, error) {
	return sandbox.Machine{ID: id, State: sandbox.Hibernated}, nil
}

// SetClaimEnv takes the keys the api pushes on each Add.
func (s savesSlowly) SetClaimEnv(context.Context, string, []sandbox.ClaimEntry) error { return nil }

func (s savesSlowly) Save(ctx context.Context, id, _ string) (sandbox.SaveInfo, error) {
	s.saving <- id
	select {
	case <-ctx.Done():
		return sandbox.SaveInfo{}, ctx.Err()
	case <-s.done:
		return sandbox.SaveInfo{}, sandbox.ErrUnavailable
	}
}

// Issue 41, Deliver 6: Home shows the user's boxes, each with its state,
// image, last save and the operation under way, and the counts of
// devices, agents and keys, not only links; in real Chromium, with boxes,
// axe-core finds no violation at 360 px light nor 1440 px dark, the page
// is no wider than 360 px, and each box's card holds its text (nothing
// cut or past its edge). TestEveryPageInEveryState shows the same boxes
// (its screenshots), without reading them.
func TestHomeShowsTheBoxesAndTheCounts(t *testing.T) {
	t.Parallel()
	sup := newSavesSlowly()
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup))
	saved := addBoxes(t, a, sup)
	alice := a.SignIn("alice")
	for _, key := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} {
		if resp, body := alice.Send("POST", "/cb/api/keys", "application/json",
			`{"name":"`+key+`","hosts":["api.example.com"],"value":"v"}`); resp.StatusCode != 201 {
			t.Fatalf("add the key %s: %d %s", key, resp.StatusCode, body)
		}
	}
	addDevice(t, a, "laptop")
	grantAgent(t, a.URL, alice, "codex")

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.emulate(narrowest, false)
	u.open("/cb/")
	u.waitText("2 boxes.", "1 device", "1 agent", "2 keys")
	var when string
	u.js(`return new Date(arguments[0]).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });`, &when, saved.Format(time.RFC3339))
	var cards []struct {
		Text    string
		Clipped bool
	}
	u.js(`return [...document.querySelectorAll("#boxes > li")].map((li) => ({ text: li.innerText.replace(/\s+/g, " ").trim(),
  clipped: li.scrollWidth > li.clientWidth || [...li.querySelectorAll("span")].some((s) => s.getBoundingClientRect().right > li.getBoundingClientRect().right + 0.5) }));`, &cards)
	want := []string{
		"main Hibernated · cbdesk:v23-desk Last saved " + when,
		"scratch-for-a-long-experiment Hibernated · cbdesk:v23-base Never saved Saving now",
	}
	if len(cards) != len(want) {
		t.Fatalf("the home page shows %d boxes: %+v; want %q", len(cards), cards, want)
	}
	for i, c := range cards {
		if c.Text != want[i] || c.Clipped {
			t.Errorf("box %d reads %q (cut or past its card: %v); want %q", i, c.Text, c.Clipped, want[i])
		}
	}
	u.fits("home with boxes")
	u.axe("home with boxes at 360 px, light")
	u.emulate(desktop, true)
	u.axe("home with boxes at 1440 px, dark")
}

// newSavesSlowly is a savesSlowly; addBoxes ends its saves at the test's end.
func newSavesSlowly() savesSlowly {
	return savesSlowly{saving: make(chan string, 1), done: make(chan struct{})}
}

// addBoxes gives alice two hibernated boxes on host1, sup's: main, saved
// at the time it answers, and scratch-for-a-long-experiment, never saved,
// with a save begun through the Boxes API (as the CLI begins one) that
// stays under way.
func addBoxes(t *testing.T, a *apitest.API, sup savesSlowly) time.Time {
	t.Helper()
	t.Cleanup(func() { close(sup.done) }) // before the api's Close: the save ends first
	ctx := context.Background()
	saved := time.Date(2026, 3, 14, 15, 9, 0, 0, time.UTC)
	for _, b := range []struct {
		id, name, image string
		saved           *time.Time
	}{
		{"cb-00000000000000a1", "main", "cbdesk:v23-desk", &saved},
		{"cb-00000000000000a2", "scratch-for-a-long-experiment", "cbdesk:v23-base", nil},
	} {
		var saveID *string // a box's save is its id, size and time
		if b.saved != nil {
			id := "save-" + b.id
			saveID = &id
		}
		if _, err := a.DB.Pool.Exec(ctx, `INSERT INTO boxes (id, user_id, name, image, state, host, identity_seed, save_id, save_size, saved_at)
			VALUES ($1, $2, $3, $4, 'hibernated', 'host1', $5, $6, 1, $7)`, b.id, a.User.ID, b.name, b.image, make([]byte, 32), saveID, b.saved); err != nil {
			t.Fatal(err)
		}
	}
	// A save of the second box, begun through the Boxes API as the CLI
	// does, stays under way (the supervisor holds it).
	boxesAPI := controlv1connect.NewBoxesClient(http.DefaultClient, a.URL,
		connect.WithInterceptors(client.BearerInterceptor(string(a.PersonalToken(a.User.ID)))))
	if _, err := boxesAPI.Save(ctx, connect.NewRequest(&controlv1.BoxOperationRequest{RequestId: "home-test-save", Box: "scratch-for-a-long-experiment"})); err != nil {
		t.Fatalf("begin a save: %v", err)
	}
	select {
	case id := <-sup.saving:
		if id != "cb-00000000000000a2" {
			t.Fatalf("the supervisor saves %s", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the save never reached the supervisor")
	}
	// The personal token served the call alone: the token page starts empty.
	if resp, body := a.SignIn("alice").Send("DELETE", "/cb/api/me/token", "", ""); resp.StatusCode != 204 {
		t.Fatalf("revoke the personal token: %d %s", resp.StatusCode, body)
	}
	return saved
}

// grantAgent registers an agent called name, approves it as the signed-in
// as, and exchanges the code: the agent then holds a grant (the Agents
// page's row).
func grantAgent(t *testing.T, base string, as *apitest.Browser, name string) {
	t.Helper()
	q := registerAgent(t, base, name)
	body, _ := json.Marshal(map[string]any{"query": q.Encode(), "max_boxes": 1, "max_running": 1, "days": 30})
	resp, text := as.Send("POST", "/cb/api/oauth/approve", "application/json", string(body))
	var approved struct{ Redirect string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &approved) != nil {
		t.Fatalf("approve %s: %d %s", name, resp.StatusCode, text)
	}
	back, err := url.Parse(approved.Redirect)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "client_id": {q.Get("client_id")},
		"redirect_uri": {q.Get("redirect_uri")}, "code_verifier": {"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"}}
	out, err := httpPost(base+oauth.TokenPath, "application/x-www-form-urlencoded", []byte(form.Encode()))
	if err != nil || !strings.Contains(string(out), `"access_token"`) {
		t.Fatalf("exchange the code of %s: %v %s", name, err, out)
	}
}

// addDevice signs alice's cocoonbox CLI in on a device called label, as
// the CLI's sign-in does at its code exchange: the device's id.
func addDevice(t *testing.T, a *apitest.API, label string) string {
	t.Helper()
	var id string
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, a.DB.Pool, func(tx pgx.Tx) error {
		var err error
		id, _, err = devices.InTx{}.CreateDevice(ctx, tx, a.User.ID, "cocoonbox-cli", label)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}
