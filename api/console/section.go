package console

import (
	"errors"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/server"
)

// What a section of the console another package serves (Devices, Keys,
// Agents: a page under /cb/, which the console serves (Section.Page), and
// its JSON calls under /cb/api/) shares: the session check of its calls,
// and how its calls read a body. Their answers differ from the console's own calls' ({"error":
// text}, not {error, message}).

// SessionUser answers the user id of the request's console session:
// Console.UserID, which a section is built with.
type SessionUser func(r *http.Request) (userID string, ok bool)

// UserID is the user id of r's console session (a SessionUser).
func (c *Console) UserID(r *http.Request) (string, bool) {
	u, ok := c.Session(r)
	return u.ID, ok
}

// Refusal is a section call's error answer (the console's shape): Error
// the machine code for programs, Message the plain sentence the page
// shows a person (docs/console.md, Errors).
type Refusal struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Calls runs h for the session's user, or answers 401 signed_out.
func (s SessionUser) Calls(h func(w http.ResponseWriter, r *http.Request, userID string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userID, ok := s(r)
		if !ok {
			server.WriteJSON(w, http.StatusUnauthorized, Refusal{"signed_out", "You are signed out. Sign in again."})
			return
		}
		h(w, r, userID)
	})
}

// ReadCall reads a section's call's JSON body of at most max bytes into
// v, JSON only: a form of another page on the same site (any port of this
// host: the Strict cookie goes along) cannot send it. When that fails it
// answers 415 or 400 bad_request and false.
func ReadCall(w http.ResponseWriter, r *http.Request, max int64, v any) bool {
	err := server.ReadJSON(r, max, v)
	switch {
	case errors.Is(err, server.ErrNotJSON):
		server.WriteJSON(w, http.StatusUnsupportedMediaType, Refusal{"bad_request", err.Error()})
	case err != nil:
		server.WriteJSON(w, http.StatusBadRequest, Refusal{"bad_request", err.Error()})
	}
	return err == nil
}
