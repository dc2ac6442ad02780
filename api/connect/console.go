package connect

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's JSON calls of Connect built so far, for
// the user of the console session (Contract: Connect, Console calls):
//
//	GET  /cb/api/connect                       200 {catalog, connectors, approvals}
//	POST /cb/api/connect/approvals/{id}/answer {decision: once|always|deny}; 204
//
// Bad input is 400 {error} naming the field and the rule, an approval not
// pending for the user 404, a POST not sent as application/json 415;
// without a session 401. The page /cb/connect is not built yet.
type Console struct {
	broker  *Broker
	session console.SessionUser
	log     *slog.Logger
}

// NewConsole is the console side of b; session is the console's
// (console.Console.UserID).
func NewConsole(b *Broker, session console.SessionUser, log *slog.Logger) *Console {
	return &Console{broker: b, session: session, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/connect", c.session.Calls(c.list))
	mux.Handle("POST /cb/api/connect/approvals/{id}/answer", c.session.Calls(c.answer))
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
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
	server.WriteJSON(w, http.StatusOK, map[string]any{"catalog": Catalog, "connectors": cs, "approvals": c.broker.Pending(userID)})
}

func (c *Console) answer(w http.ResponseWriter, r *http.Request, userID string) {
	var body struct {
		Decision Decision `json:"decision"`
	}
	if !console.ReadCall(w, r, 1<<10, &body) {
		return
	}
	if err := c.broker.Answer(userID, r.PathValue("id"), body.Decision); err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
