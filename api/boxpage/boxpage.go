// Package boxpage is the console's Boxes section, /cb/boxes (issue 43,
// Deliver 3 and 4; issue 42, Deliver 4; docs/console.md, Boxes): the
// user's boxes with their state,
// image, last save and an upgrade notice, each linking to its screen page
// (package screenpage), a form making a box, and Wake, Hibernate, Save,
// Upgrade and Delete, through JSON calls of the console to the same Boxes
// service the CLI's calls reach (package boxes), owner only. Upgrade and Delete ask first,
// as the CLI's --confirm does; the page follows each operation by reading
// the list again until none is under way. Below, a box's snapshots,
// browsed and restored into the running box (snapshots.go), and the
// shares of the boxes' screens (package shares' calls).
//
// Contract: Boxes (api) ↔ sandboxd (the operations and their states).
package boxpage

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/server"
)

var (
	//go:embed boxes.html
	boxesHTML string
	//go:embed boxes.js
	boxesJS []byte
	//go:embed snapshots.js
	snapshotsJS []byte
	//go:embed shares.js
	sharesJS []byte
)

// Page is the Boxes page, which the console serves at Path. It lists the
// boxes through the console's GET /cb/api/boxes (console.BoxSummary), a
// box's snapshots through the calls below (snapshots.go) and the shares
// through package shares' (shares.Console). Its one script is the three
// files in a row, the box list's last, as it calls the other two.
var Page = console.Page{Title: "Boxes", Main: template.HTML(boxesHTML),
	Script: console.Asset{Name: "boxes.js", Body: slices.Concat(snapshotsJS, []byte("\n"), sharesJS, []byte("\n"), boxesJS)}}

// Path is the page's path.
const Path = "/cb/boxes"

// Services answers the Boxes service, or why there is none (an api
// without a supervisor: boxes.Handler.Service's error).
type Services func() (*boxes.Service, error)

// Console serves the page's calls for the user of the console session:
//
//	POST /cb/api/boxes                  {name, request_id}; 202 as below, the box starting (boxes.Service.Create, the latest image)
//	POST /cb/api/boxes/{box}/{action}   {request_id, confirm}; 202 {box: {name, state}, operation: {id, kind, phase} | null}
//
// box is the box's name; action one of wake (boxes.Service.Ensure),
// hibernate, save, upgrade and delete, the last two with confirm true (as
// the CLI's --confirm). request_id is optional (the Boxes API's grammar;
// one is made when empty). Refusals are {error, message}, message a plain
// sentence naming the box: 400 invalid (with field "name" for a bad
// name) or confirm, 404 not_found (no such box or action), 409 busy,
// state or exists, 429 limit, 503 unavailable; 401 without a session.
type Console struct {
	boxes   Services
	session console.SessionUser
	log     *slog.Logger
}

// NewConsole is the page's calls on svc; session is the console's
// (console.Console.UserID).
func NewConsole(svc Services, session console.SessionUser, log *slog.Logger) *Console {
	return &Console{boxes: svc, session: session, log: log}
}

// Mount puts the calls on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("POST /cb/api/boxes", c.session.Calls(c.create))
	mux.Handle("POST /cb/api/boxes/{box}/{action}", c.session.Calls(c.act))
	c.snapshotsMounted(mux)
}

// action is one of the page's buttons: the Boxes service's call, the
// words its refusals use, and whether it must be confirmed.
type action struct {
	call    func(*boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error)
	doing   string // "hibernating": "main cannot be hibernated now"
	confirm string // what the confirmation says cannot be undone ("" for none)
}

var actions = map[string]action{
	"wake": {func(s *boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error) {
		return s.Ensure
	}, "woken", ""},
	"hibernate": {func(s *boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error) {
		return s.Hibernate
	}, "hibernated", ""},
	"save": {func(s *boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error) {
		return s.Save
	}, "saved", ""},
	"upgrade": {func(s *boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error) {
		return s.Upgrade
	}, "upgraded",
		"an upgrade drops every change outside /home/user and /workspace"},
	"delete": {func(s *boxes.Service) func(context.Context, boxes.Call) (*boxes.Box, *boxes.Operation, error) {
		return s.Delete
	}, "deleted",
		"a delete removes the box for good, keeping only its newest save"},
}

// create is POST /cb/api/boxes.
func (c *Console) create(w http.ResponseWriter, r *http.Request, userID string) {
	var req struct {
		Name      string `json:"name"`
		RequestID string `json:"request_id"`
	}
	if !console.ReadCall(w, r, 4<<10, &req) {
		return
	}
	if boxes.CheckName(req.Name) != nil {
		server.WriteJSON(w, http.StatusBadRequest, fieldRefusal{"invalid", "name",
			"Name: use 1 to 63 lower-case letters, digits and dashes, starting with a letter and not ending with a dash."})
		return
	}
	svc, id, ok := c.begin(w, req.RequestID)
	if !ok {
		return
	}
	b, op, err := svc.Create(r.Context(), boxes.Call{UserID: userID, RequestID: id}, boxes.CreateRequest{Name: req.Name})
	if errors.Is(err, boxes.ErrExists) {
		server.WriteJSON(w, http.StatusConflict, fieldRefusal{"exists", "name", "Name: you have a box called " + req.Name + " already."})
		return
	}
	c.answer(w, r, req.Name, created, b, op, err)
}

// created is Create's words in its refusals.
var created = action{doing: "made"}

// fieldRefusal is a refusal of one field of the page's form.
type fieldRefusal struct {
	Error   string `json:"error"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// begin answers the service and the call's request id (req's, or a new
// one), or refuses the call and answers false.
func (c *Console) begin(w http.ResponseWriter, req string) (*boxes.Service, string, bool) {
	svc, err := c.boxes()
	if err != nil {
		refuse(w, http.StatusServiceUnavailable, "unavailable", "Boxes are not available on this api now. Try again later.")
		return nil, "", false
	}
	switch {
	case req == "":
		req = newRequestID()
	case !client.RequestID.MatchString(req):
		refuse(w, http.StatusBadRequest, "invalid", "The request id must be 1 to 64 letters, digits, dots, colons, dashes or underscores.")
		return nil, "", false
	}
	return svc, req, true
}

// answer answers a call's outcome: 202 with the box and its operation,
// or the refusal of err.
func (c *Console) answer(w http.ResponseWriter, r *http.Request, name string, a action, b *boxes.Box, op *boxes.Operation, err error) {
	if err != nil {
		c.refused(w, r, name, a, err)
		return
	}
	var out answer
	if b != nil {
		out.Box.Name, out.Box.State = b.Name, b.State
	}
	if op != nil {
		out.Operation = &operation{ID: op.ID, Kind: op.Kind, Phase: op.Phase}
	}
	server.WriteJSON(w, http.StatusAccepted, out)
}

// request is the body of a call.
type request struct {
	RequestID string `json:"request_id"`
	Confirm   bool   `json:"confirm"`
}

// answer is a call's 202.
type answer struct {
	Box struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"box"`
	Operation *operation `json:"operation"`
}

type operation struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Phase string `json:"phase"`
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	server.WriteJSON(w, status, console.Refusal{Error: code, Message: message})
}

// act is POST /cb/api/boxes/{box}/{action}.
func (c *Console) act(w http.ResponseWriter, r *http.Request, userID string) {
	name, verb := r.PathValue("box"), r.PathValue("action")
	var req request
	if !console.ReadCall(w, r, 4<<10, &req) {
		return
	}
	a, ok := actions[verb]
	if !ok {
		refuse(w, http.StatusNotFound, "not_found", "There is no such thing to do to a box. Reload the page.")
		return
	}
	if a.confirm != "" && !req.Confirm {
		refuse(w, http.StatusBadRequest, "confirm", "Confirm first: "+a.confirm+".")
		return
	}
	svc, id, ok := c.begin(w, req.RequestID)
	if !ok {
		return
	}
	b, op, err := a.call(svc)(r.Context(), boxes.Call{UserID: userID, RequestID: id, Box: name})
	c.answer(w, r, name, a, b, op, err)
}

// refused answers a Boxes service's error as a sentence a person reads.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, name string, a action, err error) {
	switch {
	case errors.Is(err, boxes.ErrNotFound):
		refuse(w, http.StatusNotFound, "not_found", "You have no box called "+name+". Reload the page.")
	case errors.Is(err, boxes.ErrBusy):
		refuse(w, http.StatusConflict, "busy", name+" cannot be "+a.doing+" now: something else is being done to it. Wait until it ends, then try again.")
	case errors.Is(err, boxes.ErrState):
		refuse(w, http.StatusConflict, "state", sentence(err, boxes.ErrState))
	case errors.Is(err, boxes.ErrLimit):
		refuse(w, http.StatusTooManyRequests, "limit", name+" cannot be "+a.doing+": your account is at its limit of boxes. Hibernate or delete another box first.")
	case errors.Is(err, boxes.ErrInvalid):
		msg := name + " cannot be " + a.doing + ": the request breaks a rule of the Boxes service."
		var bad *sandbox.InvalidError
		if errors.As(err, &bad) {
			msg = name + " cannot be " + a.doing + ": " + strings.TrimSuffix(bad.Rule, ".") + "."
		}
		refuse(w, http.StatusBadRequest, "invalid", msg)
	case errors.Is(err, boxes.ErrUnavailable):
		refuse(w, http.StatusServiceUnavailable, "unavailable", "The machine holding "+name+" cannot be reached now. Try again in a minute.")
	default:
		c.log.ErrorContext(r.Context(), "console box call failed", "box", name, "err", err)
		refuse(w, http.StatusInternalServerError, "internal", name+" could not be "+a.doing+". Try again.")
	}
}

// sentence is the Boxes service's own words of err ("box main is
// hibernated; hibernate needs it running"), without the sentinel's
// suffix, as a sentence ("The box main is hibernated; ...").
func sentence(err, sentinel error) string {
	s := strings.TrimSuffix(err.Error(), ": "+sentinel.Error())
	if !strings.HasPrefix(s, "box ") {
		return "The box cannot do that now: " + s + "."
	}
	// Never capitalised: a box's name is lower case.
	return "The " + s + "."
}

// newRequestID is a request id for a call that came without one.
func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "console-" + hex.EncodeToString(b[:])
}
