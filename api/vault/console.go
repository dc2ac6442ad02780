package vault

import (
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Keys section and its JSON calls (Contract:
// Key vault), for the user of the console session:
//
//	GET    /cb/api/keys          200 {keys: [{name, hosts, how, placeholder, created, rotated}], boxes_without_keys: [{box, image}]}
//	POST   /cb/api/keys          {name, hosts, header, template, query, value}; 201 the key
//	PUT    /cb/api/keys/{name}   {value}; 200 the key
//	DELETE /cb/api/keys/{name}   204
//
// Its page, Page, the console serves at /cb/keys. Bad input is 400
// {error, field, message}: error the field and rule as the CLI says them,
// field the request's field ("hosts"), message a sentence for a person
// (plainRule); a taken NAME 409; an
// unknown one 404; a POST or PUT not sent as application/json 415. Without
// a session each call answers 401. No answer carries a value.
type Console struct {
	svc     *Service
	session console.SessionUser
	log     *slog.Logger
}

// NewConsole is the console side of svc; session is the console's
// (console.Console.UserID).
func NewConsole(svc *Service, session console.SessionUser, log *slog.Logger) *Console {
	return &Console{svc: svc, session: session, log: log}
}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/keys", c.session.Calls(c.list))
	mux.Handle("POST /cb/api/keys", c.session.Calls(c.add))
	mux.Handle("PUT /cb/api/keys/{name}", c.session.Calls(c.rotate))
	mux.Handle("DELETE /cb/api/keys/{name}", c.session.Calls(c.remove))
}

// fail answers err of the store, at this one edge.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := "the api failed; try again"
	switch {
	case errors.Is(err, ErrInvalid):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, ErrExists):
		status, msg = http.StatusConflict, err.Error()
	case errors.Is(err, ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, ErrWrongMasterKey):
		status, msg = http.StatusServiceUnavailable, ErrWrongMasterKey.Error()
		c.log.ErrorContext(r.Context(), "keys call failed", "path", r.URL.Path, "err", err)
	default:
		c.log.ErrorContext(r.Context(), "keys call failed", "path", r.URL.Path, "err", err)
	}
	answer := map[string]string{"error": msg}
	if ie := (*InputError)(nil); errors.As(err, &ie) {
		answer["field"], answer["message"] = plainRule(ie)
	} else if errors.Is(err, ErrExists) {
		answer["field"], answer["message"] = "name", "You have a key of this name already: pick another name, or rotate that key."
	}
	server.WriteJSON(w, status, answer)
}

// readJSON reads a JSON body (JSON only: a form of another page cannot send it).
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return console.ReadCall(w, r, 2*MaxValueLen, v)
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, userID string) {
	keys, boxes, err := c.svc.List(r.Context(), userID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"keys": keys, "boxes_without_keys": boxes})
}

func (c *Console) add(w http.ResponseWriter, r *http.Request, userID string) {
	var req struct {
		Name     string   `json:"name"`
		Hosts    []string `json:"hosts"`
		Header   string   `json:"header"`
		Template string   `json:"template"`
		Query    string   `json:"query"`
		Value    string   `json:"value"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	k, err := c.svc.store.Add(r.Context(), userID, ActorConsole, req.Name,
		Spec{Hosts: req.Hosts, Header: req.Header, Template: req.Template, Query: req.Query}, NewSecret(req.Value))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusCreated, k)
}

func (c *Console) rotate(w http.ResponseWriter, r *http.Request, userID string) {
	var req struct {
		Value string `json:"value"`
	}
	if !readJSON(w, r, &req) {
		return
	}
	k, err := c.svc.store.Rotate(r.Context(), userID, ActorConsole, r.PathValue("name"), NewSecret(req.Value))
	if err != nil {
		c.fail(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, k)
}

func (c *Console) remove(w http.ResponseWriter, r *http.Request, userID string) {
	if err := c.svc.store.Delete(r.Context(), userID, ActorConsole, r.PathValue("name")); err != nil {
		c.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var (
	//go:embed keys.html
	keysHTML string
	//go:embed keys.js
	keysJS []byte
)

// Page is the Keys page, which the console serves at /cb/keys
// (console.Section.Page).
var Page = console.Page{Title: "Keys", Main: template.HTML(keysHTML), Script: console.Asset{Name: "keys.js", Body: keysJS}}
