package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// WriteJSON answers v as JSON with status, never cached (Cache-Control:
// no-store: answers carry tokens and the user's own data). It is the one
// encoder of the api's JSON calls (the console's, the devices', the
// sign-in's).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ErrNotJSON is ReadJSON's refusal of a body that is not sent as
// application/json; the caller answers it 415.
var ErrNotJSON = errors.New("send the body as Content-Type: application/json")

// ReadJSON reads a console call's body (a call of the console's own
// pages, on the SameSite=Strict session cookie) into v, and is the
// console's one CSRF defence: it takes Content-Type application/json only
// (ErrNotJSON otherwise), whatever the body's length. A page of another
// origin of the same site (another port of this host, which the cookie
// goes to) can send a form (urlencoded, multipart, text/plain) or a body
// of nothing at all without asking, but not application/json: that needs
// CORS, which the api never grants. So an empty body is refused too when
// it is not sent as JSON, and taken as {} when it is.
//
// The body is at most max bytes and one JSON object with no field v does
// not have; any other error says what was wrong, for a 400.
func ReadJSON(r *http.Request, max int64, v any) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return ErrNotJSON
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("the body is not the call's JSON object (at most %d bytes): %w", max, err)
	}
	return nil
}
