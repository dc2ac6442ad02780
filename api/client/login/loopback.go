package login

// The client side of the RFC 8252 loopback sign-in that cocoonbox login
// runs: a listener on 127.0.0.1:0, a PKCE pair and a state, the authorize
// URL, and the one callback that carries the code back.
// Contract: Browser sign-in and device tokens.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cocoonbox/cocoonbox/api/client"
)

// Request is what the client asks for: its endpoint (the api's issuer, e.g.
// "http://127.0.0.1:18200", no trailing slash), its client, the device name
// and an optional invite code.
type Request struct {
	Endpoint   string
	Client     client.FirstParty
	DeviceName string
	Invite     string
}

// Result is the callback's code with what the token request needs with it.
type Result struct {
	Code         string
	RedirectURI  string
	CodeVerifier string
}

// Flow is one sign-in waiting for its callback.
type Flow struct {
	req         Request
	ln          net.Listener
	srv         *http.Server
	state       string
	verifier    string
	redirectURI string
	once        sync.Once
	done        chan outcome
}

type outcome struct {
	code string
	err  error
}

// Start listens on 127.0.0.1:0 and makes the PKCE pair and the state. The
// caller opens AuthorizeURL in a browser, then calls Wait; Close frees the
// port (Wait does too).
func Start(req Request) (*Flow, error) {
	req.Endpoint = strings.TrimSuffix(req.Endpoint, "/")
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen on the loopback for the browser's callback: %w", err)
	}
	f := &Flow{
		req:         req,
		ln:          ln,
		state:       rand.Text(),
		verifier:    rand.Text() + rand.Text(), // 52 base32 characters: RFC 7636 §4.1 asks 43 to 128
		redirectURI: fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port),
		done:        make(chan outcome, 1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", f.callback)
	f.srv = &http.Server{Handler: mux}
	go f.srv.Serve(ln)
	return f, nil
}

// RedirectURI is http://127.0.0.1:PORT/callback of this flow's listener.
func (f *Flow) RedirectURI() string { return f.redirectURI }

// AuthorizeURL is <endpoint>/cb/oauth/authorize with the contract's query.
func (f *Flow) AuthorizeURL() string {
	r := client.AuthorizeRequest{
		Client:        f.req.Client,
		RedirectURI:   f.redirectURI,
		Scope:         client.Scope,
		State:         f.state,
		CodeChallenge: client.S256(f.verifier),
		DeviceName:    f.req.DeviceName,
		Invite:        f.req.Invite,
	}
	return f.req.Endpoint + "/cb/oauth/authorize?" + r.Query().Encode()
}

// Wait returns the code once the browser came back with it, after checking
// the state and that iss is the endpoint (RFC 9207). A refusal (error=...)
// is an *OAuthError. Wait ends when ctx does, and frees the port.
func (f *Flow) Wait(ctx context.Context) (Result, error) {
	defer f.Close()
	select {
	case o := <-f.done:
		if o.err != nil {
			return Result{}, o.err
		}
		return Result{Code: o.code, RedirectURI: f.redirectURI, CodeVerifier: f.verifier}, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("waiting for the browser's sign-in: %w", context.Cause(ctx))
	}
}

// Close stops the listener, letting a callback being answered finish its
// page first (a few seconds at most); a Wait still waiting ends with ctx only.
func (f *Flow) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.srv.Shutdown(ctx)
}

// OAuthError is the authorization server's refusal as the callback carried it.
type OAuthError struct {
	Code        string // "access_denied", "invalid_scope", ...
	Description string
}

func (e *OAuthError) Error() string {
	if e.Description == "" {
		return e.Code
	}
	return e.Code + ": " + e.Description
}

// callback takes the first callback whose state matches; any other request
// (a stale tab, a local process guessing) is answered 400 and changes nothing.
func (f *Flow) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.state)) != 1 {
		page(w, http.StatusBadRequest, "This is not the sign-in that cocoonbox is waiting for.",
			"Its state does not match. Start again with cocoonbox login.")
		return
	}
	// RFC 9207: the issuer must be ours, else a code from another server could be replayed to us.
	if iss := q.Get("iss"); iss != f.req.Endpoint {
		f.finish(outcome{err: fmt.Errorf("the sign-in came back from issuer %q, not %q (RFC 9207): if %s is your api, log in with --endpoint %s", iss, f.req.Endpoint, iss, iss)})
		page(w, http.StatusBadRequest, "Sign-in failed.", "The answer came from another server. See the terminal.")
		return
	}
	if code := q.Get("error"); code != "" {
		f.finish(outcome{err: &OAuthError{Code: code, Description: q.Get("error_description")}})
		page(w, http.StatusOK, "Sign-in was not completed.", "You can close this page and go back to the terminal.")
		return
	}
	code := q.Get("code")
	if code == "" {
		page(w, http.StatusBadRequest, "Sign-in failed.", "The answer carries no code. Start again with cocoonbox login.")
		return
	}
	f.finish(outcome{code: code})
	page(w, http.StatusOK, "Signed in.", "You can close this page and go back to the terminal.")
}

func (f *Flow) finish(o outcome) { f.once.Do(func() { f.done <- o }) }

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cocoonbox</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Text}}</p></body></html>
`))

func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	pageTmpl.Execute(w, struct{ Title, Text string }{title, text})
}
