package connect

import (
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's JSON calls of Connect and the console
// flow's callback, for the user of the console session (Contract:
// Connect, Console flow and Console calls):
//
//	GET    /cb/api/connect                       200 {catalog, connectors, approvals}
//	POST   /cb/api/connect/{connector}/begin     {name, url, header?, key?}: 200 {"connected"} or {"url"}
//	PUT    /cb/api/connect/{connector}/policy    {tool, policy}; 204
//	POST   /cb/api/connect/{connector}/check     200 {"account"}
//	DELETE /cb/api/connect/{connector}           200 {"revoked"}
//	GET    /cb/api/connect/activity[?connector=] 200 {"activity": [Activity...]}, the caller's own, newest first
//	POST   /cb/api/connect/approvals/{id}/answer {decision: once|always|deny}; 204
//	GET    /cocoonbox.connect/callback?code&state&iss  200, a page going on to /cb/connect?connected=<id> or ?error=<message>
//
// Bad input is 400 {error} naming the field and the rule, an unknown
// connector or an approval not pending for the user 404, a name taken
// 409, a server that cannot be reached or refuses 502 saying why, a POST
// not sent as application/json 415; without a session 401.
type Console struct {
	broker    *Broker
	sessions  Sessions
	publicURL string
	log       *slog.Logger
}

// Sessions is what Connect's console calls need of the console's sessions.
type Sessions struct {
	// User is the user of the request's session (console.Console.UserID).
	User console.SessionUser
	// Live says whether a session is still live for a user at the
	// callback (console.Console.SessionLive).
	Live SessionLive
}

// NewConsole is the console side of b; publicURL is connect.public_url,
// the origin of CallbackPath.
func NewConsole(b *Broker, s Sessions, publicURL string, log *slog.Logger) *Console {
	return &Console{broker: b, sessions: s, publicURL: publicURL, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/connect", c.sessions.User.Calls(c.list))
	mux.Handle("POST /cb/api/connect/{connector}/begin", c.sessions.User.Calls(c.begin))
	mux.Handle("PUT /cb/api/connect/{connector}/policy", c.sessions.User.Calls(c.policy))
	mux.Handle("POST /cb/api/connect/{connector}/check", c.sessions.User.Calls(c.check))
	mux.Handle("DELETE /cb/api/connect/{connector}", c.sessions.User.Calls(c.disconnect))
	mux.Handle("GET /cb/api/connect/activity", c.sessions.User.Calls(c.activity))
	mux.Handle("POST /cb/api/connect/approvals/{id}/answer", c.sessions.User.Calls(c.answer))
	mux.Handle("GET "+CallbackPath, http.HandlerFunc(c.callback))
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.Is(err, ErrExists):
		server.WriteJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case errors.Is(err, ErrUpstream):
		server.WriteJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		c.log.ErrorContext(r.Context(), "connect call failed", "path", r.URL.Path, "err", err)
		server.WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "the api failed; try again"})
	}
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, userID string) {
	cs, err := c.broker.List(r.Context(), userID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	pending, err := c.broker.Pending(r.Context(), userID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"catalog": Catalog, "connectors": cs, "approvals": pending})
}

// begin is step 1 and 2 of the console flow: with a key the grant is
// stored now; without one the answer is the authorization URL, and the
// nonce goes in NonceCookie.
func (c *Console) begin(w http.ResponseWriter, r *http.Request, userID string) {
	if id := r.PathValue("connector"); id != "custom" {
		if inCatalog(id) {
			c.fail(w, r, &InputError{"connector", id + " is not available yet; only custom is"})
		} else {
			c.fail(w, r, &InputError{"connector", id + " is not in the catalog"})
		}
		return
	}
	var body struct {
		Name   string `json:"name"`
		URL    string `json:"url"`
		Header string `json:"header"`
		Key    string `json:"key"`
	}
	if !console.ReadCall(w, r, 8<<10, &body) {
		return
	}
	cu := Custom{Name: body.Name, URL: body.URL, Header: body.Header, Key: body.Key}
	if cu.Key != "" {
		got, err := c.broker.ConnectCustom(r.Context(), userID, cu)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		server.WriteJSON(w, http.StatusOK, map[string]string{"connected": got.ID})
		return
	}
	sum, ok := console.SessionSum(r)
	if !ok { // a personal token's call: no session to tie the flow to
		c.fail(w, r, &InputError{"session", "the OAuth sign-in begins from a console session (the page /cb/connect)"})
		return
	}
	begun, err := c.broker.BeginOAuth(r.Context(), userID, sum, cu, c.publicURL+CallbackPath)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: NonceCookie, Value: begun.Nonce, Path: "/cocoonbox.connect/", MaxAge: int(FlowTTL.Seconds()),
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	server.WriteJSON(w, http.StatusOK, map[string]string{"url": begun.URL})
}

// callbackPage sends the browser on to the Connect page. A redirect
// would not do: the navigation began at the vendor's site, so a browser
// sends the Strict session cookie (cb_session) on none of its redirects,
// and /cb/connect would ask to sign in again. A meta refresh is the
// page's own navigation, which carries it; the CSP allows it, and there
// is no script.
var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={{.}}"><title>Connect</title></head>
<body><p><a href="{{.}}">Go on to Connect</a></p></body></html>
`))

// callback is step 3: the cookie is cleared whatever happens, and the
// browser goes back to the page with what came of it.
func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: NonceCookie, Value: "", Path: "/cocoonbox.connect/", MaxAge: -1,
		HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	nonce := ""
	if ck, err := r.Cookie(NonceCookie); err == nil {
		nonce = ck.Value
	}
	id, err := c.broker.CompleteOAuth(r.Context(), r.URL.Query(), nonce, c.publicURL+CallbackPath, c.sessions.Live)
	to := "/cb/connect?connected=" + url.QueryEscape(id)
	if err != nil {
		var fe *FlowError
		msg := err.Error()
		if !errors.As(err, &fe) && !errors.Is(err, ErrUpstream) && !errors.Is(err, ErrExists) {
			c.log.ErrorContext(r.Context(), "connect callback failed", "err", err)
			msg = "the api failed; connect again"
		}
		to = "/cb/connect?error=" + url.QueryEscape(msg)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := callbackPage.Execute(w, to); err != nil {
		c.log.ErrorContext(r.Context(), "connect callback page", "err", err)
	}
}

func (c *Console) policy(w http.ResponseWriter, r *http.Request, userID string) {
	var body struct {
		Tool   string `json:"tool"`
		Policy string `json:"policy"`
	}
	if !console.ReadCall(w, r, 1<<10, &body) {
		return
	}
	p, err := ParsePolicy(body.Policy)
	if err == nil {
		err = c.broker.SetPolicy(r.Context(), userID, r.PathValue("connector"), body.Tool, p)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) check(w http.ResponseWriter, r *http.Request, userID string) {
	account, _, err := c.broker.Check(r.Context(), userID, r.PathValue("connector"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]string{"account": account})
}

func (c *Console) disconnect(w http.ResponseWriter, r *http.Request, userID string) {
	ok, err := c.broker.Disconnect(r.Context(), userID, r.PathValue("connector"), DoorConsole)
	if err == nil && !ok {
		err = ErrNotFound
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]bool{"revoked": true})
}

// activity is the caller's audit rows (Contract: Connect, Console calls
// and Audit), of one connector with ?connector=.
func (c *Console) activity(w http.ResponseWriter, r *http.Request, userID string) {
	rows, err := c.broker.Activity(r.Context(), userID, r.URL.Query().Get("connector"))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"activity": rows})
}

func (c *Console) answer(w http.ResponseWriter, r *http.Request, userID string) {
	var body struct {
		Decision Decision `json:"decision"`
	}
	if !console.ReadCall(w, r, 1<<10, &body) {
		return
	}
	if err := c.broker.Answer(r.Context(), userID, r.PathValue("id"), body.Decision); err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var (
	//go:embed page/connect.html
	pageHTML string
	//go:embed page/connect.js
	pageJS []byte
)

// Page is the Connect page, which the console serves at /cb/connect
// (console.Section.Page): the connectors with their tools and a policy
// per tool, the pending approvals, connecting a custom server with a key
// or through its sign-in, check and disconnect.
var Page = console.Page{Title: "Connect", Main: template.HTML(pageHTML), Script: console.Asset{Name: "connect.js", Body: pageJS}}
