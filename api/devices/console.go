package devices

import (
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Devices section and its JSON calls, for the
// user of the console session (cb_session):
//
//	GET    /cb/api/devices                 200 [{id, client, label, created_at, used_at}]
//	DELETE /cb/api/devices/{id}            204; 404 for another user's device or one gone
//	POST   /cb/api/me/sign-out-everywhere  {} as application/json; 204, the session cookie cleared
//
// Its page, Page, the console serves (console.Section.Page).
//
// Without a session each call answers 401.
type Console struct {
	store   *Store
	session console.SessionUser
	// clearSession expires the session cookie in the answer.
	clearSession func(http.ResponseWriter)
	log          *slog.Logger
}

// NewConsole is the console side of store; session and clearSession are
// the console's (console.Console.UserID and ClearCookie).
func NewConsole(store *Store, session console.SessionUser, clearSession func(http.ResponseWriter), log *slog.Logger) *Console {
	return &Console{store: store, session: session, clearSession: clearSession, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/devices", c.session.Calls(c.list))
	mux.Handle("DELETE /cb/api/devices/{id}", c.session.Calls(c.revoke))
	mux.Handle("POST /cb/api/me/sign-out-everywhere", c.session.Calls(c.signOutEverywhere))
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, userID string) {
	list, err := c.store.List(r.Context(), userID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if list == nil {
		list = []Device{}
	}
	server.WriteJSON(w, http.StatusOK, list)
}

func (c *Console) revoke(w http.ResponseWriter, r *http.Request, userID string) {
	err := c.store.Revoke(r.Context(), userID, r.PathValue("id"))
	if errors.Is(err, ErrNotFound) {
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "That device is not signed in any more: it was revoked already, or it is not yours."})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) signOutEverywhere(w http.ResponseWriter, r *http.Request, userID string) {
	// JSON only, like the console's other calls: another site's form
	// cannot sign the user out.
	var none struct{}
	if !console.ReadCall(w, r, 1<<10, &none) {
		return
	}
	if err := c.store.SignOutEverywhere(r.Context(), userID); err != nil {
		c.fail(w, r, err)
		return
	}
	c.clearSession(w)
	w.WriteHeader(http.StatusNoContent)
}

var (
	//go:embed devices.html
	devicesHTML string
	//go:embed devices.js
	devicesJS []byte
)

// Page is the Devices page, which the console serves at /cb/devices.
var Page = console.Page{Title: "Devices", Main: template.HTML(devicesHTML), Script: console.Asset{Name: "devices.js", Body: devicesJS}}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "devices call failed", "path", r.URL.Path, "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, console.Refusal{Error: "internal", Message: "The api failed. Try again in a minute."})
}
