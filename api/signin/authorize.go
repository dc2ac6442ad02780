package signin

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// The authorization endpoint (RFC 6749 §4.1.1-4.1.2) as a console page: the
// page checks the request, asks the signed-in user (signing in first when
// there is no session), and on Allow sends the browser to the loopback
// callback with code, state and iss. A first-party client needs the click
// too: any local process can claim its client_id.
//
// Contract: Browser sign-in and device tokens.

//go:embed authorize.html
var authorizeHTML string

// authorizeTmpl is the console's consent page with this page's slots.
var authorizeTmpl = console.NewConsentPage(authorizeHTML)

// authorizePage is GET /cb/oauth/authorize. A request whose client or
// redirect URI is wrong is an error page (400) and goes nowhere; another bad
// request goes back to the client's callback with its error (§4.1.2.1); a
// good one is the consent page, whose script asks POST /cb/api/oauth/check.
func (h *Handler) authorizePage(w http.ResponseWriter, r *http.Request) {
	console.SetConsentHeaders(w.Header())
	q := r.URL.Query()
	if h.agents != nil && agentClient(q["client_id"]) {
		h.agents.ServeHTTP(w, r)
		return
	}
	_, perr := ParseAuthorizeRequest(q)
	if perr != nil && perr.Redirect {
		http.Redirect(w, r, h.errorCallback(q, perr), http.StatusSeeOther)
		return
	}
	page := struct {
		Error, Detail string
		Query         string
	}{Query: r.URL.RawQuery}
	status := http.StatusOK
	if perr != nil {
		page.Error, page.Detail = console.AuthorizeMessage(perr.Code), perr.Description
		status = http.StatusBadRequest
	}
	authorizeTmpl.Write(w, status, page)
}

// checkAnswer is POST /cb/api/oauth/check's answer for a good request.
type checkAnswer struct {
	Account    bool   `json:"account"`
	DeviceName string `json:"device_name"`
	ClientID   string `json:"client_id"`
	ClientName string `json:"client_name"`
	User       string `json:"user"`
	Invite     string `json:"invite,omitempty"`
}

// refusal is the answer of a bad request: the error, and the callback URL
// to send the browser to when the error may go back to the client.
type refusal struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Redirect    string `json:"redirect,omitempty"`
	// Message is the sentence the consent page shows a person
	// (console.AuthorizeMessage); Description stays for programs.
	Message string `json:"message"`
}

// MarshalJSON writes r with its Message, so no refusal goes out without
// the person's sentence.
func (r refusal) MarshalJSON() ([]byte, error) {
	type plain refusal
	r.Message = console.AuthorizeMessage(r.Error)
	return json.Marshal(plain(r))
}

// request reads a console call's {query}, and answers for it when the
// request is bad or there is no session (401 login_required).
func (h *Handler) request(w http.ResponseWriter, r *http.Request) (*client.AuthorizeRequest, Principal, bool) {
	q, ok := consoleCall(w, r)
	if !ok {
		return nil, Principal{}, false
	}
	ar, perr := ParseAuthorizeRequest(q)
	if perr != nil {
		ref := refusal{Error: perr.Code, Description: perr.Description}
		if perr.Redirect {
			ref.Redirect = h.errorCallback(q, perr)
		}
		server.WriteJSON(w, http.StatusBadRequest, ref)
		return nil, Principal{}, false
	}
	p, ok := h.session(r)
	if !ok {
		server.WriteJSON(w, http.StatusUnauthorized, refusal{Error: "login_required", Description: "sign in to the console first"})
		return nil, Principal{}, false
	}
	return ar, p, true
}

// check is POST /cb/api/oauth/check {query}: what the consent page shows.
func (h *Handler) check(w http.ResponseWriter, r *http.Request) {
	if h.toAgents(w, r) {
		return
	}
	ar, p, ok := h.request(w, r)
	if !ok {
		return
	}
	server.WriteJSON(w, http.StatusOK, checkAnswer{Account: true, DeviceName: ar.DeviceName,
		ClientID: ar.Client.ID, ClientName: ar.Client.Name, User: p.UserName, Invite: ar.Invite})
}

// approve is POST /cb/api/oauth/approve {query}: the user's Allow. It stores
// a one-use code and answers the callback URL with code, state and iss.
func (h *Handler) approve(w http.ResponseWriter, r *http.Request) {
	if h.toAgents(w, r) {
		return
	}
	ar, p, ok := h.request(w, r)
	if !ok {
		return
	}
	code, err := h.store.IssueCode(r.Context(), p.UserID, ar)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	h.log.InfoContext(r.Context(), "sign-in approved", "user", p.UserID, "client", ar.Client.ID, "device_name", ar.DeviceName)
	server.WriteJSON(w, http.StatusOK, map[string]string{
		"redirect": h.callbackURL(ar.RedirectURI, url.Values{"code": {code}, "state": {ar.State}}),
	})
}

// deny is POST /cb/api/oauth/deny {query}: the user's Deny, which goes back
// to the client as access_denied (§4.1.2.1).
func (h *Handler) deny(w http.ResponseWriter, r *http.Request) {
	if h.toAgents(w, r) {
		return
	}
	ar, _, ok := h.request(w, r)
	if !ok {
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]string{
		"redirect": h.errorCallback(ar.Query(), &Error{Code: client.ErrAccessDenied, Description: "the user denied the sign-in"}),
	})
}
