package console_test

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/signup"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
)

// shots, when set, is where TestEveryPageInEveryState writes each page's
// screenshots: `go test ./api/console -run TestEveryPageInEveryState
// -console.shots=$PWD/docs/console` (make console-shots) regenerates
// docs/console/.
var shots = flag.String("console.shots", "", "write each page's screenshots (390 and 1440 px wide, light and dark, PNG) into this directory")

// axe-core, vendored from npm for the browser tests (testdata/axe-core/VENDOR.md).
//
//go:embed testdata/axe-core/axe.min.js
var axeSource string

// The widths the pages are checked and shown at: the narrowest phone the
// pages must fit without scrolling sideways, a common phone, a desktop.
const (
	narrowest = 360
	phone     = 390
	desktop   = 1440
)

// pageState is one page of the console in one state: its path, the text
// that says it is loaded (and in the state), and what brings it there
// after it loads.
type pageState struct {
	name  string // its screenshots' name: docs/console/NAME-390-light.png
	path  string
	ready string
	// act drives the page into its state once it is ready (nil: none).
	act func(u *ui)
	// shot: the state is one of the README's screenshots.
	shot bool
	// at is the element the screenshots start at, scrolled to the top of
	// the viewport ("": the page's top), for a state below the fold.
	at string
}

// Every page of the console, signed out, as a user and as an admin, empty
// and full, with refusals shown, in real Chromium: axe-core finds no
// violation at 360 px light and at 1440 px dark, nor with the
// confirmation dialog open; no page is wider than a 360 px viewport;
// every destructive button (the danger buttons, Rotate) opens the
// confirmation dialog first, and Cancel closes it. With -console.shots it
// writes each state's screenshots.
func TestEveryPageInEveryState(t *testing.T) {
	t.Parallel()
	sup := newSavesSlowly()
	a := apitest.New(t, apitest.WithoutSession(), apitest.WithSupervisor("host1", sup), apitest.WithConnect(connect.UpstreamConfig{}))
	addBoxes(t, a, sup) // Home's list (TestHomeShowsTheBoxesAndTheCounts reads it)
	a.AddUser("boss", true)
	alice := a.SignIn("alice")
	// The Boxes page's snapshots and shares (issue 42 and 43, Deliver 4):
	// a snapshot of main, and a share of it.
	addSnapshot(t, a, a.User.ID, "main", map[string]string{"home/user/notes.txt": "the notes\n", "home/user/docs/plan.txt": "the plan\n",
		"workspace/app/main.go": "package main\n"})
	if resp, body := alice.Send("POST", "/cb/api/shares", "application/json", `{"box":"main","view_only":true,"days":7}`); resp.StatusCode != 201 {
		t.Fatalf("share main: %d %s", resp.StatusCode, body)
	}
	if resp, body := alice.Send("POST", "/cb/api/keys", "application/json",
		`{"name":"OPENAI_API_KEY","hosts":["api.openai.com"],"value":"sk-test"}`); resp.StatusCode != 201 {
		t.Fatalf("add a key: %d %s", resp.StatusCode, body)
	}
	boss := a.SignIn("boss")
	for _, call := range [][2]string{{"/cb/api/invites", `{"uses":3,"days":7}`}, {"/cb/api/invite-tokens", `{"label":"the docs bot"}`}} {
		if resp, body := boss.Send("POST", call[0], "application/json", call[1]); resp.StatusCode != 201 {
			t.Fatalf("POST %s: %d %s", call[0], resp.StatusCode, body)
		}
	}
	addConnector(t, a, a.User.ID)
	agent := registerAgent(t, a.URL, "Totally Official Anthropic Claude")
	// Full lists, so the stacked tables and their Revoke and Reject buttons
	// are checked: a device, an agent's grant, a person in the queue.
	addDevice(t, a, "laptop")
	grantAgent(t, a.URL, alice, "codex")
	if _, err := a.DB.Pool.Exec(context.Background(), "UPDATE signup_settings SET enabled = true, invite_only = false, seats = 0"); err != nil {
		t.Fatal(err)
	}
	if out, err := a.Signup.Arrive(context.Background(), signup.Arrival{IdP: "github", Subject: "1001", Login: "Person1",
		Email: "p1@example.com", EmailVerified: true}); err != nil || out.QueueID == "" {
		t.Fatalf("queue a person: %+v, %v", out, err)
	}

	u := newUI(t, a.URL)
	cli := "/cb/oauth/authorize?" + cliQuery().Encode()
	signedOut := []pageState{
		{name: "signin", path: "/cb/", ready: "Sign in to cocoonbox", shot: true},
		{name: "signin-refused", path: "/cb/", ready: "Sign in to cocoonbox", act: func(u *ui) {
			u.typeIn("#user", "alice")
			u.typeIn("#password", "wrong horse")
			u.click("#signin-submit")
			u.waitText("Wrong user name or password")
		}, shot: true},
		{name: "signin-empty", path: "/cb/", ready: "Sign in to cocoonbox", act: func(u *ui) {
			u.click("#signin-submit")
			u.waitText("Enter your password.")
		}},
		{name: "queue", path: "/cb/queue", ready: "not in the queue", shot: true},
		{name: "consent-signin", path: cli, ready: "go on with the cocoonbox CLI's sign-in"},
		{name: "consent-refused", path: "/cb/oauth/authorize?client_id=cocoonbox-cli", ready: "This sign-in cannot go on", act: func(u *ui) {
			u.plain("#error")
		}},
	}
	asAlice := []pageState{
		{name: "home", path: "/cb/", ready: "Saving now", shot: true},
		// Issue 43, Deliver 3: the Boxes page, full (main with its upgrade
		// notice, a save under way) and with a refusal (Save of the box
		// mid-save); empty as boss, below.
		{name: "boxes", path: "/cb/boxes", ready: "A newer image, cbdesk:v24-desk", act: func(u *ui) { u.waitText("Saving now") }, shot: true},
		{name: "boxes-refused", path: "/cb/boxes", ready: "Saving now", act: func(u *ui) {
			u.click(`button[aria-label="Save scratch-for-a-long-experiment"]`)
			u.waitText("cannot be saved now")
			u.plain("#error-summary li")
		}},
		// Issue 42, Deliver 4: main's snapshot listed and browsed, with
		// the restore form; issue 43, Deliver 4: the shares, a days
		// refused beside its field, then a link shown once and a log.
		{name: "boxes-snapshots", path: "/cb/boxes", ready: "A newer image, cbdesk:v24-desk", act: snapshotsShown, shot: true, at: "#snapshots-section"},
		{name: "boxes-shares-refused", path: "/cb/boxes", ready: "1 link works now", act: func(u *ui) {
			u.typeIn("#share-days", "40")
			u.click("#share-submit")
			u.waitText("Days: give 1 to 30 days")
			u.invalid("share-days")
			u.plain("#error-summary li")
		}},
		{name: "boxes-shares", path: "/cb/boxes", ready: "1 link works now", act: sharesShown, shot: true, at: "#shares-section"},
		{name: "token", path: "/cb/token", ready: "You have no personal token", act: func(u *ui) {
			u.click("#token-generate")
			u.waitText("Copy it now")
		}, shot: true},
		{name: "keys", path: "/cb/keys", ready: "OPENAI_API_KEY", shot: true},
		{name: "keys-refused", path: "/cb/keys", ready: "OPENAI_API_KEY", act: func(u *ui) {
			u.typeIn("#key-name", "ANOTHER")
			u.typeIn("#key-hosts", "https://api.example.com")
			u.typeIn("#key-value", "v")
			u.click("#add-submit")
			u.waitText("give the host name only")
		}},
		{name: "connect", path: "/cb/connect", ready: "Echoes the message back"},
		{name: "connect-refused", path: "/cb/connect", ready: "Echoes the message back", act: func(u *ui) {
			u.typeIn("#connect-name", "github")
			u.typeIn("#connect-url", "https://mcp.example.com/mcp")
			u.click("#connect-submit")
			u.waitText("is a catalog id")
		}},
		{name: "devices", path: "/cb/devices", ready: "laptop", shot: true},
		{name: "agents", path: "/cb/agents", ready: "1 box, 1 running", shot: true},
		{name: "identities", path: "/cb/identities", ready: "GitHub sign-in is not configured", shot: true},
		{name: "account", path: "/cb/account", ready: "You are alice", act: func(u *ui) { u.typeIn("#name", "alice") }, shot: true},
		{name: "admins-only", path: "/cb/admin", ready: "Admins only"},
		{name: "queue-member", path: "/cb/queue", ready: "you need no place in the queue"},
		{name: "consent-cli", path: cli, ready: "Sign in the cocoonbox CLI on laptop?", act: func(u *ui) {
			// Deliver 1's Sign out on every page: the consent page is drawn
			// before the session is known, and names the account with its
			// way out once it is.
			var who string
			u.js(`const w = document.getElementById("who"), s = document.getElementById("signout");
  return !w.hidden && s && !s.hidden && s.offsetParent !== null ? w.textContent : "";`, &who)
			if who != "alice" {
				u.t.Errorf("the consent page's header names %q with a Sign out, want alice", who)
			}
		}, shot: true},
		{name: "consent-agent", path: "/cb/oauth/authorize?" + agent.Encode(), ready: "Unverified agent: its name is its own claim", act: func(u *ui) {
			// Deliver 4: the warning box shows, naming the redirect's host.
			var got struct {
				Shown    bool
				Redirect string
			}
			u.js(`const w = document.getElementById("unverified"); return { shown: !w.hidden && w.offsetParent !== null && w.classList.contains("warning"),
  redirect: document.getElementById("unverified-redirect").textContent };`, &got)
			if !got.Shown || got.Redirect != "127.0.0.1:1" {
				u.t.Errorf("the unverified agent's warning: shown %v, redirect host %q; want shown, 127.0.0.1:1", got.Shown, got.Redirect)
			}
		}, shot: true},
	}
	asAlice = append(asAlice, pageState{name: "consent-signed-out", path: cli, ready: "Sign in the cocoonbox CLI on laptop?", act: func(u *ui) {
		// Sign out on a consent page asks again, for another account.
		u.click("#signout")
		u.waitText("go on with the cocoonbox CLI's sign-in")
		u.signIn("alice")
	}})
	asBoss := []pageState{
		{name: "boxes-empty", path: "/cb/boxes", ready: "You have no boxes yet"},
		{name: "admin", path: "/cb/admin", ready: "p1@example.com", act: func(u *ui) {
			u.click("#invite-create")
			u.waitText("The link, shown once")
		}, shot: true},
		{name: "admin-refused", path: "/cb/admin", ready: "the docs bot", act: func(u *ui) {
			u.clear("#seats")
			u.typeIn("#seats", "-1")
			u.click("#save")
			u.waitText("Seats: give 0 to")
		}},
	}
	for _, s := range signedOut {
		u.check(s)
	}
	u.signIn("alice")
	for _, s := range asAlice {
		u.check(s)
	}
	u.signOut()
	u.signIn("boss")
	for _, s := range asBoss {
		u.check(s)
	}
}

// ui is one headless Chromium on the api at base, for one test.
type ui struct {
	t    *testing.T
	ctx  context.Context
	b    *webdriver.Browser
	base string
}

func newUI(t *testing.T, base string) *ui {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	b, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.SetScriptTimeout(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	return &ui{t: t, ctx: ctx, b: b, base: base}
}

func (u *ui) step(what string, err error) {
	u.t.Helper()
	if err != nil {
		u.t.Fatalf("%s: %v", what, err)
	}
}

func (u *ui) open(path string) { u.t.Helper(); u.step("open "+path, u.b.Go(u.ctx, u.base+path)) }
func (u *ui) click(css string) { u.t.Helper(); u.step("click "+css, u.b.Click(u.ctx, css)) }
func (u *ui) typeIn(css, text string) {
	u.t.Helper()
	u.step("type into "+css, u.b.Type(u.ctx, css, text))
}
func (u *ui) emulate(w int, dark bool) {
	u.t.Helper()
	u.step("emulate", u.b.Emulate(u.ctx, w, 900, dark))
}

func (u *ui) clear(css string) {
	u.t.Helper()
	u.step("clear "+css, u.b.Execute(u.ctx, "document.querySelector(arguments[0]).value = ''", []any{css}, nil))
}

// waitText waits until the page's text holds each of texts, for 30 s
// at most.
func (u *ui) waitText(texts ...string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	u.step("wait for "+strings.Join(texts, ", "), u.b.WaitFor(ctx, strings.Join(texts, ", "), func(_, text string) bool {
		for _, s := range texts {
			if !strings.Contains(text, s) {
				return false
			}
		}
		return true
	}))
}

// plain fails unless the text of css is a sentence a person reads: no
// JSON path, CLI flag, RFC or snake_case name (refusals_test.go's
// codeLike), issue 41, Deliver 2.
func (u *ui) plain(css string) {
	u.t.Helper()
	var text string
	u.js(`return document.querySelector(arguments[0]).textContent`, &text, css)
	if text == "" || codeLike.MatchString(text) {
		u.t.Errorf("%s reads %q; want a plain sentence", css, text)
	}
}

// js runs script in the page and decodes its value into out.
func (u *ui) js(script string, out any, args ...any) {
	u.t.Helper()
	u.step("run "+script[:min(len(script), 60)], u.b.Execute(u.ctx, script, args, out))
}

func (u *ui) signIn(name string) {
	u.t.Helper()
	u.open("/cb/")
	u.typeIn("#user", name)
	u.typeIn("#password", apitest.Password)
	u.click("#signin-submit")
	u.waitText("Hello, " + name)
}

func (u *ui) signOut() {
	u.t.Helper()
	u.open("/cb/")
	u.click("#signout")
	u.waitText("Sign in to cocoonbox")
}

// check loads s and checks it: axe at 360 px light and 1440 px dark, the
// width at 360 px, each destructive button asking first; then its
// screenshots when asked for.
func (u *ui) check(s pageState) {
	u.t.Helper()
	u.emulate(narrowest, false)
	u.open(s.path)
	u.waitText(s.ready)
	if s.act != nil {
		s.act(u)
	}
	u.fits(s.name)
	u.stacked(s.name)
	u.axe(s.name + " at 360 px, light")
	u.emulate(desktop, true)
	u.axe(s.name + " at 1440 px, dark")
	u.asksFirst(s.name)
	if *shots != "" && s.shot {
		for _, w := range []int{phone, desktop} {
			for _, dark := range []bool{false, true} {
				u.screenshot(s.name, w, dark, s.at)
			}
		}
	}
}

// fits fails when the page is wider than a 360 px viewport, naming the
// elements that reach past it.
func (u *ui) fits(name string) {
	u.t.Helper()
	var got struct {
		Scroll, Width int
		Over          []string
	}
	u.js(`const w = document.documentElement.clientWidth;
const over = [...document.querySelectorAll("body *")].filter((e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right > w + 0.5; })
  .slice(0, 8).map((e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className ? "." + String(e.className).replace(/ /g, ".") : "") + " to " + Math.round(e.getBoundingClientRect().right));
return { scroll: document.documentElement.scrollWidth, width: w, over };`, &got)
	if got.Scroll > got.Width || len(got.Over) > 0 {
		u.t.Errorf("%s: %d px wide in a %d px viewport; past it: %v", name, got.Scroll, got.Width, got.Over)
	}
}

// stacked fails unless each row of each table shown is a card (display
// block) under 600 px (Deliver 5: tables stack on phones).
func (u *ui) stacked(name string) {
	u.t.Helper()
	var flat []string
	u.js(`return [...document.querySelectorAll("main table tbody tr")].filter((tr) => tr.offsetParent !== null && getComputedStyle(tr).display !== "block")
  .map((tr) => tr.closest("table").id + ": " + getComputedStyle(tr).display);`, &flat)
	if len(flat) > 0 {
		u.t.Errorf("%s at 360 px: table rows not stacked: %v", name, flat)
	}
}

// axe runs axe-core on the page as it is and fails on each violation.
func (u *ui) axe(what string) {
	u.t.Helper()
	var loaded string
	u.js(axeSource+"\n;return typeof window.axe;", &loaded)
	if loaded != "object" {
		u.t.Fatalf("%s: axe-core did not load (%s)", what, loaded)
	}
	var violations []struct {
		ID, Impact, Help string
		Nodes            []string
	}
	u.step("axe on "+what, u.b.ExecuteAsync(u.ctx, `const done = arguments[arguments.length - 1];
axe.run(document, { resultTypes: ["violations"] })
  .then((r) => done(r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary) }))))
  .catch((e) => done([{ id: "axe-error", impact: "", help: String(e), nodes: [] }]));`, nil, &violations))
	for _, v := range violations {
		u.t.Errorf("%s: axe %s (%s): %s\n\t%s", what, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
	}
}

// asksFirst clicks each destructive button the page shows (a danger
// button, Rotate) and fails unless the confirmation dialog opens, naming
// what goes; the first one's open dialog is checked by axe too; Cancel
// closes it.
func (u *ui) asksFirst(name string) {
	u.t.Helper()
	var n int
	u.js(`window.__destructive = [...document.querySelectorAll("main button.danger, main button.rotate")].filter((b) => b.offsetParent !== null);
return window.__destructive.length;`, &n)
	for i := range n {
		var label string
		u.js(`const b = window.__destructive[arguments[0]]; b.click(); return b.getAttribute("aria-label") || b.textContent;`, &label, i)
		var title string
		ctx, cancel := context.WithTimeout(u.ctx, 15*time.Second)
		u.step(name+": "+label+" asks first", u.b.WaitFor(ctx, "the confirmation of "+label, func(_, _ string) bool {
			u.js(`const d = document.getElementById("confirm"); return d.open ? document.getElementById("confirm-title").textContent : "";`, &title)
			return title != ""
		}))
		cancel()
		if !strings.HasSuffix(title, "?") {
			u.t.Errorf("%s: %s's confirmation asks %q", name, label, title)
		}
		if i == 0 {
			u.axe(name + " with the confirmation of " + label + " open")
		}
		u.click("#confirm-cancel")
		var open bool
		u.js(`return document.getElementById("confirm").open;`, &open)
		if open {
			u.t.Errorf("%s: Cancel left %s's confirmation open", name, label)
		}
	}
}

// screenshot writes the page at width w, light or dark, into *shots,
// recompressed (Chromium's PNGs are about a third larger).
func (u *ui) screenshot(name string, w int, dark bool, at string) {
	u.t.Helper()
	u.emulate(w, dark)
	u.js(`if (arguments[0]) document.querySelector(arguments[0]).scrollIntoView(); else window.scrollTo(0, 0);`, nil, at)
	raw, err := u.b.Screenshot(u.ctx)
	u.step("screenshot "+name, err)
	img, err := png.Decode(bytes.NewReader(raw))
	u.step("decode the screenshot of "+name, err)
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	u.step("encode the screenshot of "+name, enc.Encode(&out, img))
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	file := filepath.Join(*shots, fmt.Sprintf("%s-%d-%s.png", name, w, scheme))
	u.step("write "+file, os.WriteFile(file, out.Bytes(), 0o644))
}

// cliQuery is a good authorization request of the cocoonbox CLI (RFC
// 7636's example challenge).
func cliQuery() url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {"cocoonbox-cli"}, "redirect_uri": {"http://127.0.0.1:41234/callback"},
		"scope": {"account"}, "code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"},
		"state": {"st4te"}, "device_name": {"laptop"}}
}

// registerAgent registers a client named name (RFC 7591: its name is its
// own claim) and answers an authorization request of it.
func registerAgent(t *testing.T, base, name string) url.Values {
	t.Helper()
	redirect := "http://127.0.0.1:1/callback"
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"}})
	resp, err := httpPost(base+"/cocoonbox.oauth/register", "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal(resp, &got); err != nil || got.ClientID == "" {
		t.Fatalf("register %q: %v %s", name, err, resp)
	}
	return url.Values{"response_type": {"code"}, "client_id": {got.ClientID}, "redirect_uri": {redirect},
		"code_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "code_challenge_method": {"S256"}, "state": {"s"}}
}

func httpPost(url, ctype string, body []byte) ([]byte, error) {
	resp, err := http.Post(url, ctype, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// addConnector gives userID a connected custom server with two tools, one
// of them ask, as a row (the page never opens its sealed secrets, so
// these are none).
func addConnector(t *testing.T, a *apitest.API, userID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.DB.Pool.Exec(ctx, `INSERT INTO connect_grants (id, user_id, connector, kind, url, header, auth, secret_sealed, tools)
		VALUES ('0123456789abcdef0123456789abcdef', $1, 'everything', 'custom', 'https://mcp.example.com/mcp', 'X-Api-Key', 'key', '\x00',
		'[{"name":"echo","description":"Echoes the message back","inputSchema":{"type":"object"}},{"name":"get-sum","description":"Adds two numbers","inputSchema":{"type":"object"}}]')`, userID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB.Pool.Exec(ctx, "INSERT INTO connect_policies (user_id, connector, tool, policy) VALUES ($1, 'everything', 'get-sum', 'ask')", userID); err != nil {
		t.Fatal(err)
	}
}
