package agents

import (
	"context"
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Agents section and its JSON calls, for the
// user of the console session (cb_session):
//
//	GET    /cb/api/agents       200 [{id, client_id, client_name, verified_host, approved_at, expires_at,
//	                            last_used_at (to the minute, null before use), max_boxes, max_running,
//	                            new, boxes: [{box_id, name, state}]}], newest first
//	DELETE /cb/api/agents/{id}  204; 404 for another user's grant or one ended, 400 for a malformed id
//	POST   /cb/api/agents/seen  {} as application/json (415 otherwise); 204, every grant no longer new
//
// Its page, Page, the console serves at /cb/agents (it posts seen once it
// has listed them).
//
// Without a session each call answers 401 and the page sends the browser
// to the sign-in.
//
// Contract: OAuth for agents, "The user".
type Console struct {
	store   *Store
	session console.SessionUser
	log     *slog.Logger
}

// NewConsole is the console side of store; session is the console's
// (console.Console.UserID).
func NewConsole(store *Store, session console.SessionUser, log *slog.Logger) *Console {
	return &Console{store: store, session: session, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/agents", c.session.Calls(c.list))
	mux.Handle("DELETE /cb/api/agents/{id}", c.session.Calls(c.revoke))
	mux.Handle("POST /cb/api/agents/seen", c.session.Calls(c.seen))
}

// Notice is the home page's notice for userID: the grants not yet seen
// (console.Section.Notice).
func (c *Console) Notice(ctx context.Context, userID string) string {
	names, err := c.store.Unseen(ctx, userID)
	if err != nil {
		c.log.ErrorContext(ctx, "agents: read the unseen grants", "user", userID, "err", err)
		return ""
	}
	return notice(names)
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, userID string) {
	list, err := c.store.List(r.Context(), userID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	server.WriteJSON(w, http.StatusOK, list)
}

func (c *Console) revoke(w http.ResponseWriter, r *http.Request, userID string) {
	id := r.PathValue("id")
	err := c.store.Revoke(r.Context(), userID, id)
	switch {
	case errors.Is(err, ErrMalformed):
		server.WriteJSON(w, http.StatusBadRequest, console.Refusal{Error: "bad_request", Message: "That is not an agent's id. Reload the page."})
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "That agent cannot use your account any more: it was revoked already, or it is not yours."})
	case err != nil:
		c.fail(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *Console) seen(w http.ResponseWriter, r *http.Request, userID string) {
	// JSON only, like the console's other calls.
	var none struct{}
	if !console.ReadCall(w, r, 1<<10, &none) {
		return
	}
	if err := c.store.Seen(r.Context(), userID); err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var (
	//go:embed agents.html
	agentsHTML string
	//go:embed agents.js
	agentsJS []byte
)

// Page is the Agents page, which the console serves at /cb/agents
// (console.Section.Page).
var Page = console.Page{Title: "Agents", Main: template.HTML(agentsHTML), Script: console.Asset{Name: "agents.js", Body: agentsJS}}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "agents call failed", "path", r.URL.Path, "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, console.Refusal{Error: "internal", Message: "The api failed. Try again in a minute."})
}
