package devices

import (
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Devices section and its JSON calls, for the
// user of the console session (cb_session):
//
//	GET    /cb/api/devices                 200 [{id, client, label, created_at, used_at}]
//	DELETE /cb/api/devices/{id}            204; 404 for another user's device or one gone
//	POST   /cb/api/me/sign-out-everywhere  {} as application/json; 204, the session cookie cleared
//	GET    /cb/devices                     the Devices page
//
// Without a session each call answers 401.
type Console struct {
	store *Store
	// session answers the user id of the request's console session.
	session func(*http.Request) (userID string, ok bool)
	// clearSession expires the session cookie in the answer.
	clearSession func(http.ResponseWriter)
	log          *slog.Logger
}

// NewConsole is the console side of store.
func NewConsole(store *Store, session func(*http.Request) (string, bool), clearSession func(http.ResponseWriter), log *slog.Logger) *Console {
	return &Console{store: store, session: session, clearSession: clearSession, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/devices", c.user(c.list))
	mux.Handle("DELETE /cb/api/devices/{id}", c.user(c.revoke))
	mux.Handle("POST /cb/api/me/sign-out-everywhere", c.user(c.signOutEverywhere))
	mux.Handle("GET /cb/devices", http.HandlerFunc(c.page))
}

// user runs h for the session's user, or answers 401.
func (c *Console) user(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, ok := c.session(r)
		if !ok {
			server.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "sign in to the console first"})
			return
		}
		h(w, r, userID)
	})
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
		server.WriteJSON(w, http.StatusNotFound, map[string]string{"error": "no device " + r.PathValue("id") + " of yours"})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) signOutEverywhere(w http.ResponseWriter, r *http.Request, userID string) {
	// JSON only, like the console's other calls: a form of another page on
	// the same site (any port of this host: the Strict cookie goes along)
	// cannot send it, so it cannot sign the user out.
	var none struct{}
	if err := server.ReadJSON(r, 1<<10, &none); errors.Is(err, server.ErrNotJSON) {
		server.WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": err.Error()})
		return
	} else if err != nil {
		server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if err := c.store.SignOutEverywhere(r.Context(), userID); err != nil {
		c.fail(w, r, err)
		return
	}
	c.clearSession(w)
	w.WriteHeader(http.StatusNoContent)
}

//go:embed devices.html
var devicesPage []byte

// page is the Devices page; without a session it is the console's sign-in,
// which comes back here.
func (c *Console) page(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(r); !ok {
		http.Redirect(w, r, "/cb/?return_to=/cb/devices", http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Write(devicesPage)
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "devices call failed", "path", r.URL.Path, "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, map[string]string{"error": "the api failed; try again"})
}
