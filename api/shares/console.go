package shares

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console is the console's calls on the shares (issue 43, Deliver 4, "the
// console too"; docs/console.md, Boxes), which the Boxes page makes for
// the user of the console session, as cocoonbox share create, list,
// revoke and log do through the Shares service:
//
//	GET    /cb/api/shares           200 {shares: [ConsoleShare]}, newest first
//	POST   /cb/api/shares           {box, view_only, days}; 201 {share: ConsoleShare, link}
//	DELETE /cb/api/shares/{id}      200 {share: ConsoleShare}; the link stops and its open viewers close
//	GET    /cb/api/shares/{id}/log  200 {events: [{event, at_ms, viewer, address, reason}]}, newest first
//
// days is 0 (DefaultDays) or 1 to MaxDays. The link (Link) is in the
// create's answer only: its secret is the fragment, which a browser never
// sends, and the api keeps its hash only. Refusals are {error, message}
// (console.Refusal), with field "box" or "days" for the form's: 400
// invalid, 404 not_found (no such box or share of the user's), 401
// without a session. The calls' bodies are JSON only (console.ReadCall:
// the console's CSRF defence); DELETE is no simple request, so another
// origin cannot send it without CORS, which the api never grants.
type Console struct {
	st      *Store
	live    *Viewers
	session console.SessionUser
	origin  string
	log     *slog.Logger
}

// NewConsole is the calls on st; live's viewers of a revoked share end;
// origin is the links' (config.Issuer), session the console's
// (console.Console.UserID).
func NewConsole(st *Store, live *Viewers, session console.SessionUser, origin string, log *slog.Logger) *Console {
	return &Console{st: st, live: live, session: session, origin: origin, log: log}
}

// Mount puts the calls on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/shares", c.session.Calls(c.list))
	mux.Handle("POST /cb/api/shares", c.session.Calls(c.create))
	mux.Handle("DELETE /cb/api/shares/{id}", c.session.Calls(c.revoke))
	mux.Handle("GET /cb/api/shares/{id}/log", c.session.Calls(c.events))
}

// ConsoleShare is a share as the page shows it: times in Unix
// milliseconds (0 for a share never revoked), BoxName the box's name
// (kept after the box is deleted, BoxGone then), Live whether the link
// opens the screen now, Viewers its viewers open on this api.
type ConsoleShare struct {
	ID        string `json:"id"`
	BoxName   string `json:"box"`
	BoxGone   bool   `json:"box_gone"`
	ViewOnly  bool   `json:"view_only"`
	CreatedMs int64  `json:"created_ms"`
	ExpiresMs int64  `json:"expires_ms"`
	RevokedMs int64  `json:"revoked_ms"`
	Live      bool   `json:"live"`
	Viewers   int    `json:"viewers"`
}

func (c *Console) share(sh Share) ConsoleShare {
	return ConsoleShare{ID: sh.ID, BoxName: sh.BoxName, BoxGone: sh.BoxID == "", ViewOnly: sh.ViewOnly,
		CreatedMs: sh.CreatedAt.UnixMilli(), ExpiresMs: sh.ExpiresAt.UnixMilli(), RevokedMs: ms(sh.RevokedAt),
		Live: sh.Live(c.st.now()), Viewers: c.live.Count(sh.ID)}
}

type fieldRefusal struct {
	Error   string `json:"error"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, userID string) {
	list, err := c.st.List(r.Context(), userID)
	if err != nil {
		c.fail(w, r, "Your shares could not be read", err)
		return
	}
	out := []ConsoleShare{}
	for _, sh := range list {
		out = append(out, c.share(sh))
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"shares": out})
}

func (c *Console) create(w http.ResponseWriter, r *http.Request, userID string) {
	var req struct {
		Box      string `json:"box"`
		ViewOnly bool   `json:"view_only"`
		Days     int    `json:"days"`
	}
	if !console.ReadCall(w, r, 4<<10, &req) {
		return
	}
	// The store's own checks, said in the form's words, beside its field.
	switch {
	case req.Box == "":
		server.WriteJSON(w, http.StatusBadRequest, fieldRefusal{"invalid", "box", "Box: choose the box whose screen to share."})
		return
	case req.Days < 0 || req.Days > MaxDays:
		server.WriteJSON(w, http.StatusBadRequest, fieldRefusal{"invalid", "days", "Days: give 1 to 30 days (7 when left empty)."})
		return
	}
	sh, secret, err := c.st.Create(r.Context(), userID, req.Box, req.ViewOnly, req.Days)
	switch {
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, fieldRefusal{"not_found", "box", "Box: you have no box called " + req.Box + ". Reload the page."})
		return
	case err != nil:
		c.fail(w, r, "The share of "+req.Box+" could not be made", err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, map[string]any{"share": c.share(sh), "link": Link(c.origin, secret)})
}

func (c *Console) revoke(w http.ResponseWriter, r *http.Request, userID string) {
	sh, err := c.st.Revoke(r.Context(), userID, r.PathValue("id"))
	switch {
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "You have no such share. Reload the page."})
		return
	case err != nil:
		c.fail(w, r, "The share could not be revoked", err)
		return
	}
	c.live.Revoke(sh.ID) // this api's at once; the others' through Follow
	server.WriteJSON(w, http.StatusOK, map[string]any{"share": c.share(sh)})
}

// consoleEvent is a line of a share's log.
type consoleEvent struct {
	Event   string `json:"event"`
	AtMs    int64  `json:"at_ms"`
	Viewer  string `json:"viewer"`
	Address string `json:"address"`
	Reason  string `json:"reason"`
}

func (c *Console) events(w http.ResponseWriter, r *http.Request, userID string) {
	id := r.PathValue("id")
	if id == "" { // Log reads every share's for ""
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "You have no such share. Reload the page."})
		return
	}
	list, err := c.st.Log(r.Context(), userID, id)
	switch {
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "You have no such share. Reload the page."})
		return
	case err != nil:
		c.fail(w, r, "The share's log could not be read", err)
		return
	}
	out := []consoleEvent{}
	for _, e := range list {
		out = append(out, consoleEvent{e.Event, e.At.UnixMilli(), e.Viewer, e.Address, e.Reason})
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"events": out})
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	c.log.ErrorContext(r.Context(), "console share call failed", "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, console.Refusal{Error: "internal", Message: what + ". Try again."})
}
