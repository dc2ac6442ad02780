// Package signin is the authorization server of the first-party clients: the
// RFC 8252 loopback browser sign-in of the cocoonbox CLI and the app, from the
// consent page to the device token. One file per endpoint, each following the
// RFC section it implements.
//
// Contract: Browser sign-in and device tokens.
package signin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Principal is the console's signed-in user: the users row's id and
// name, as the consent page shows it.
type Principal struct {
	UserID, UserName string
}

// Handler serves the sign-in's endpoints. Build it with NewHandler and
// mount it with Mount.
type Handler struct {
	store   *Store
	issuer  string
	session func(*http.Request) (Principal, bool)
	revoke  func(ctx context.Context, secret string) error
	log     *slog.Logger
	// agents is the agents' authorization server (api/oauth), nil with
	// OAuth off.
	agents http.Handler
}

// NewHandler is the sign-in of the api reachable at issuer (its public URL,
// the iss of RFC 9207, no trailing slash). session answers the console
// session of a request; revoke revokes the device token with this secret,
// leaving an unknown or personal token alone.
func NewHandler(store *Store, issuer string, session func(*http.Request) (Principal, bool),
	revoke func(ctx context.Context, secret string) error, log *slog.Logger) *Handler {
	return &Handler{store: store, issuer: issuer, session: session, revoke: revoke, log: log}
}

// WithAgents shares the endpoints with the agents' authorization server
// (api/oauth's Agents; OAuth for agents): a request whose client is not
// cocoonbox-cli or cocoonbox-app, a refresh_token grant, and the revoke of
// an agent's token (cba_, cbr_) go to agents. Call before Mount.
func (h *Handler) WithAgents(agents http.Handler) *Handler {
	h.agents = agents
	return h
}

// agentClient says whether a request's client_id names an agent: given
// once and not first-party. A client_id given twice stays here (the
// first-party check refuses it).
func agentClient(ids []string) bool {
	if len(ids) != 1 {
		return false
	}
	_, first := client.LookupFirstParty(ids[0])
	return !first
}

// toAgents hands a consent page's call {query} of an agent's request to
// agents, answering whether it did; the body is left for this handler
// otherwise.
func (h *Handler) toAgents(w http.ResponseWriter, r *http.Request) bool {
	if h.agents == nil {
		return false
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<10))
	r.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return false
	}
	var body struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(b, &body) != nil {
		return false
	}
	q, err := url.ParseQuery(body.Query)
	if err != nil || !agentClient(q["client_id"]) {
		return false
	}
	h.agents.ServeHTTP(w, r)
	return true
}

// Mount puts the endpoints on mux (a net/http.ServeMux or the api's server).
func (h *Handler) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/oauth/authorize", http.HandlerFunc(h.authorizePage))
	mux.Handle("POST /cb/api/oauth/check", http.HandlerFunc(h.check))
	mux.Handle("POST /cb/api/oauth/approve", http.HandlerFunc(h.approve))
	mux.Handle("POST /cb/api/oauth/deny", http.HandlerFunc(h.deny))
	mux.Handle("POST /cocoonbox.oauth/token", http.HandlerFunc(h.token))
	mux.Handle("POST /cocoonbox.oauth/revoke", http.HandlerFunc(h.revokeToken))
}

// callbackURL is the redirect URI with the parameters of RFC 6749 §4.1.2 and
// iss (RFC 9207).
func (h *Handler) callbackURL(redirectURI string, params url.Values) string {
	params.Set("iss", h.issuer)
	return redirectURI + "?" + params.Encode()
}

// errorCallback is the redirect of a refusal (RFC 6749 §4.1.2.1).
func (h *Handler) errorCallback(q url.Values, e *Error) string {
	p := url.Values{"error": {e.Code}, "error_description": {e.Description}}
	if st := q.Get("state"); st != "" && len(st) <= maxState {
		p.Set("state", st)
	}
	return h.callbackURL(q.Get("redirect_uri"), p)
}

// consoleCall reads the body {"query": "<authorize query>"} of the
// consent page's calls. It takes JSON only, which a cross-site form cannot
// send (with the SameSite=Strict session cookie, the CSRF defence).
func consoleCall(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	var body struct {
		Query string `json:"query"`
	}
	if err := server.ReadJSON(r, 16<<10, &body); errors.Is(err, server.ErrNotJSON) {
		server.WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": client.ErrInvalidRequest, "error_description": err.Error()})
		return nil, false
	} else if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": client.ErrInvalidRequest, "error_description": `the body must be {"query": "..."}: ` + err.Error()})
		return nil, false
	}
	q, err := url.ParseQuery(body.Query)
	if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": client.ErrInvalidRequest, "error_description": "query is not a URL query: " + err.Error()})
		return nil, false
	}
	return q, true
}

// writeOAuthError answers an OAuth error as JSON (RFC 6749 §5.2): 401 for
// invalid_client, 500 for server_error, else 400.
func writeOAuthError(w http.ResponseWriter, e *Error) {
	status := http.StatusBadRequest
	switch e.Code {
	case client.ErrInvalidClient:
		status = http.StatusUnauthorized
	case client.ErrServerError:
		status = http.StatusInternalServerError
	}
	server.WriteJSON(w, status, map[string]string{"error": e.Code, "error_description": e.Description})
}

// serverError logs err and answers server_error, never err's text.
func (h *Handler) serverError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.ErrorContext(r.Context(), "sign-in failed", "path", r.URL.Path, "err", err)
	writeOAuthError(w, &Error{Code: client.ErrServerError, Description: "the api failed; try again"})
}
