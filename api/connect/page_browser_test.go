package connect_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/connect"
	"github.com/cocoonbox/cocoonbox/api/webdriver"
	"github.com/cocoonbox/cocoonbox/internal/wait"
)

// page is headless Chromium on an api's console, for one test.
type page struct {
	t    *testing.T
	ctx  context.Context
	b    *webdriver.Browser
	base string
}

func newPage(t *testing.T, base string, flags ...string) *page {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	b, err := webdriver.StartWith(ctx, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &page{t: t, ctx: ctx, b: b, base: base}
}

func (p *page) step(what string, err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) open(path string) { p.t.Helper(); p.step("open "+path, p.b.Go(p.ctx, p.base+path)) }
func (p *page) click(css string) { p.t.Helper(); p.step("click "+css, p.b.Click(p.ctx, css)) }
func (p *page) typeIn(css, text string) {
	p.t.Helper()
	p.step("type into "+css, p.b.Type(p.ctx, css, text))
}

// waitText waits, 60 s at most, until the page's text holds want and
// none of without.
func (p *page) waitText(want string, without ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 60*time.Second)
	defer cancel()
	p.step("wait for "+want, p.b.WaitFor(ctx, want, func(_, text string) bool {
		for _, w := range without {
			if strings.Contains(text, w) {
				return false
			}
		}
		return strings.Contains(text, want)
	}))
}

func (p *page) signIn() {
	p.t.Helper()
	p.open("/cb/")
	p.typeIn("#user", "alice")
	p.typeIn("#password", apitest.Password)
	p.click("#signin-submit")
	p.waitText("Hello, alice")
}

// Issue 44, must show: headless Chromium connecting a server that needs
// OAuth through /cb/connect. Alice gives only the URL of another
// cocoonbox-api's control MCP; the page sends the browser to that api's
// consent page (Chromium resolves its public name to loopback and trusts
// its certificate alone), where she signs in and clicks Allow; the
// redirect brings the browser, with its cb_connect cookie, to the api's
// callback, and back to /cb/connect, which shows the connector and its
// tools.
func TestTheConnectPageConnectsAServerThroughItsSignIn(t *testing.T) {
	f := newFlowFixture(t)
	p := newPage(t, f.a.URL, "--host-resolver-rules=MAP "+publicName+" 127.0.0.1",
		"--ignore-certificate-errors-spki-list="+f.as.spki())
	p.signIn()
	p.open("/cb/connect")
	p.waitText("Nothing connected yet.")
	p.typeIn("#connect-name", "agents")
	p.typeIn("#connect-url", f.as.URL+client.MCPPath)
	p.click("#connect-submit")
	p.waitText("Sign in to the console to answer an agent's request.")
	p.typeIn("#user", "alice")
	p.typeIn("#password", apitest.Password)
	p.click("#signin-submit")
	p.waitText("cocoonbox Connect") // the client's name, once the consent shows
	p.click("#allow")
	p.waitText("Connected agents.")
	p.waitText("box_list")
	url, err := p.b.URL(p.ctx)
	if err != nil || url != f.a.URL+"/cb/connect" {
		t.Fatalf("the page's address after the callback: %q, %v; want %s/cb/connect without the answer", url, err, f.a.URL)
	}
}

// Issue 44, must show: headless Chromium clicking through /cb/connect.
// Alice signs in, connects server-everything with its header key through
// the form, sets get-sum to ask in its select; a call of get-sum on the
// mode B door (the Go SDK's client) waits until the page shows its
// approval and Allow once is clicked, then answers; Disconnect asks
// first, and the connector and its tools leave the page and the door.
func TestTheConnectPageConnectsApprovesAndDisconnects(t *testing.T) {
	ev, a, token, _ := withEverything(t)
	p := newPage(t, a.URL)
	p.signIn()

	p.open("/cb/connect")
	p.waitText("Nothing connected yet.")
	p.typeIn("#connect-name", "everything")
	p.typeIn("#connect-url", ev.URL)
	p.typeIn("#connect-header", ev.Header)
	p.typeIn("#connect-key", ev.Key)
	p.click("#connect-submit")
	p.waitText("Connected everything.")
	p.waitText("get-sum")

	var changed bool
	p.step("set get-sum to ask", p.b.Execute(p.ctx, `const s = document.getElementById("policy-everything-get-sum");
  s.value = "ask"; s.dispatchEvent(new Event("change")); return true;`, nil, &changed))
	waitPolicy(t, a, "get-sum", connect.PolicyAsk)
	// The page drawn anew before the call: its approval can show only by
	// the page asking again while it is open.
	p.open("/cb/connect")
	p.waitText("get-sum")

	cs := door(t, a, token)
	type answer struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "everything__get-sum", Arguments: map[string]any{"a": 40, "b": 2}})
		done <- answer{res, err}
	}()
	p.waitText("Waiting for your approval")
	select {
	case got := <-done:
		t.Fatalf("get-sum answered before its approval: %v %v", got.res, got.err)
	default:
	}
	p.click(`button[aria-label="Allow everything get-sum once"]`)
	select {
	case got := <-done:
		if got.err != nil || got.res.IsError || !strings.Contains(text(got.res), "42") {
			t.Fatalf("get-sum 40 2 after Allow once: %v %v %q", got.err, got.res, text(got.res))
		}
	case <-time.After(60 * time.Second):
		t.Fatal("get-sum did not answer within 60 s of Allow once")
	}

	p.click(`button[aria-label="Disconnect everything"]`)
	p.waitText("Disconnect everything?")
	p.click("#confirm-ok")
	p.waitText("Nothing connected yet.", "get-sum")
	if names := toolNames(t, door(t, a, token)); len(names) != 0 {
		t.Fatalf("tools on the door after Disconnect: %v", names)
	}
}

// waitPolicy waits until GET /cb/api/connect shows tool's policy as want.
func waitPolicy(t *testing.T, a *apitest.API, tool string, want connect.Policy) {
	t.Helper()
	wait.Eventually(t, 60*time.Second, tool+"'s policy "+string(want), func() (bool, string) {
		resp, body := a.Session.Send("GET", "/cb/api/connect", "", "")
		var got struct{ Connectors []connect.Connector }
		if resp.StatusCode == 200 && json.Unmarshal([]byte(body), &got) == nil && len(got.Connectors) == 1 {
			for _, tl := range got.Connectors[0].Tools {
				if tl.Name == tool && tl.Policy == want {
					return true, ""
				}
			}
		}
		return false, "GET /cb/api/connect answered " + body
	})
}
