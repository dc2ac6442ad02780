package wake

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Schedules page and its JSON calls
// (Contract: Scheduled wake; issue 46, Deliver 3; docs/wake.md), for the
// user of the console session, on the Store the Schedules service
// (cocoonbox box schedule, the control MCP) uses:
//
//	GET    /cb/api/schedules            200 {boxes: [{id, name, schedules: [View]}]}, every box of the user, oldest first
//	POST   /cb/api/schedules            {box, at, cron, time_zone, keep_up_minutes}; 201 the View
//	DELETE /cb/api/schedules/{box}/{id} 204; 404 not_found
//
// box is the box's name; at a wall-clock time (LocalLayout) read in
// time_zone (an IANA zone, "" for UTC), or cron five fields read there;
// keep_up_minutes a whole number 0 to MaxKeepUp in minutes, as text (a
// form's value; "" is 0). Bad input is 400 {error: "invalid", field,
// message}: field the request's field, message a plain sentence naming it
// as the form does; a box the user does not have is 404 not_found.
// Without a session each call answers 401.
type Console struct {
	st      *Store
	session console.SessionUser
	log     *slog.Logger
}

// NewConsole is the console side of st; session is the console's
// (console.Console.UserID).
func NewConsole(st *Store, session console.SessionUser, log *slog.Logger) *Console {
	return &Console{st: st, session: session, log: log}
}

var (
	//go:embed schedules.html
	schedulesHTML string
	//go:embed schedules.js
	schedulesJS []byte
)

// Page is the Schedules page, which the console serves at /cb/schedules.
var Page = console.Page{Title: "Schedules", Main: template.HTML(schedulesHTML), Script: console.Asset{Name: "schedules.js", Body: schedulesJS}}

// Mount puts the routes on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/schedules", c.session.Calls(c.list))
	mux.Handle("POST /cb/api/schedules", c.session.Calls(c.set))
	mux.Handle("DELETE /cb/api/schedules/{box}/{id}", c.session.Calls(c.clear))
}

// View is a schedule as the page shows it: the stored fields, and each
// said as a person says it, in the schedule's time zone.
type View struct {
	ID            int64      `json:"id"`
	BoxID         string     `json:"box_id"`
	At            *time.Time `json:"at,omitempty"`
	Cron          string     `json:"cron,omitempty"`
	TimeZone      string     `json:"time_zone"`
	KeepUpSeconds int64      `json:"keep_up_seconds"`
	NextAt        *time.Time `json:"next_at,omitempty"`
	SleepAt       *time.Time `json:"sleep_at,omitempty"`
	// Wakes is when it wakes the box: "Once, Tue 8 Dec 2026 07:30 CET" or
	// "30 7 * * 1-5 in Europe/Berlin".
	Wakes string `json:"wakes"`
	// Next is the next wake ("Tue 8 Dec 2026 07:30 CET"), or "Done" after
	// a one-time wake.
	Next string `json:"next"`
	// KeepUp is how long the box stays up after each wake ("1 h 30 min",
	// "No").
	KeepUp string `json:"keep_up"`
	// UpUntil is the last wake's end of keep-up while it is ahead ("" when
	// not): idle hibernate leaves the box up until then.
	UpUntil string `json:"up_until,omitempty"`
}

// timeLayout is a time as the page says it.
const timeLayout = "Mon 2 Jan 2006 15:04 MST"

func (c *Console) view(sc Schedule) View {
	loc, err := time.LoadLocation(sc.TimeZone)
	if err != nil {
		loc = time.UTC // stored zones were loaded when set; a tzdata without it says UTC
	}
	v := View{ID: sc.ID, BoxID: sc.BoxID, At: sc.At, Cron: sc.Cron, TimeZone: sc.TimeZone, KeepUpSeconds: int64(sc.KeepUp / time.Second),
		NextAt: sc.Next, SleepAt: sc.SleepAt, Next: "Done", KeepUp: keepUpText(sc.KeepUp)}
	if sc.Cron != "" {
		v.Wakes = sc.Cron + " in " + sc.TimeZone
	} else if sc.At != nil {
		v.Wakes = "Once, " + sc.At.In(loc).Format(timeLayout)
	}
	if sc.Next != nil {
		v.Next = sc.Next.In(loc).Format(timeLayout)
	}
	if sc.SleepAt != nil && sc.SleepAt.After(c.st.now()) {
		v.UpUntil = sc.SleepAt.In(loc).Format(timeLayout)
	}
	return v
}

// keepUpText is d as a person says it: "No", "45 min", "2 h", "1 h 30
// min", "7 days".
func keepUpText(d time.Duration) string {
	switch {
	case d <= 0:
		return "No"
	case d%(24*time.Hour) == 0:
		if d == 24*time.Hour {
			return "1 day"
		}
		return strconv.Itoa(int(d/(24*time.Hour))) + " days"
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	var parts []string
	if h > 0 {
		parts = append(parts, strconv.Itoa(h)+" h")
	}
	if m > 0 || h == 0 {
		parts = append(parts, strconv.Itoa(m)+" min")
	}
	return strings.Join(parts, " ")
}

// boxView is a box of the user and its schedules.
type boxView struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Schedules []View `json:"schedules"`
}

// boxes are user's boxes, oldest first.
func (st *Store) boxes(ctx context.Context, user string) ([]boxView, error) {
	rows, err := st.pool.Query(ctx, "SELECT id, name FROM boxes WHERE user_id = $1 ORDER BY created_at, id", user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (boxView, error) {
		b := boxView{Schedules: []View{}}
		return b, r.Scan(&b.ID, &b.Name)
	})
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, user string) {
	bs, err := c.st.boxes(r.Context(), user)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	scs, err := c.st.List(r.Context(), user, "")
	if err != nil {
		c.fail(w, r, err)
		return
	}
	for _, sc := range scs {
		for i := range bs {
			if bs[i].ID == sc.BoxID {
				bs[i].Schedules = append(bs[i].Schedules, c.view(sc))
			}
		}
	}
	if bs == nil {
		bs = []boxView{}
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"boxes": bs})
}

// setRequest is POST /cb/api/schedules's body: the page's form.
type setRequest struct {
	Box           string `json:"box"`
	At            string `json:"at"`
	Cron          string `json:"cron"`
	TimeZone      string `json:"time_zone"`
	KeepUpMinutes string `json:"keep_up_minutes"`
}

// labels are the form's names of a FieldError's fields.
var labels = map[string]string{"at": "Wake at", "cron": "Cron expression", "time_zone": "Time zone"}

func (c *Console) set(w http.ResponseWriter, r *http.Request, user string) {
	var req setRequest
	if !console.ReadCall(w, r, 4<<10, &req) {
		return
	}
	if req.Box == "" {
		c.refuse(w, "box", "Choose a box to wake.")
		return
	}
	sp := Spec{Cron: strings.TrimSpace(req.Cron), TimeZone: strings.TrimSpace(req.TimeZone)}
	maxMinutes := int64(MaxKeepUp / time.Minute)
	minutes, err := strconv.ParseInt(strings.TrimSpace(req.KeepUpMinutes), 10, 64)
	if strings.TrimSpace(req.KeepUpMinutes) == "" {
		minutes, err = 0, nil
	}
	if err != nil || minutes < 0 || minutes > maxMinutes {
		c.refuse(w, "keep_up_minutes", fmt.Sprintf("Keep it up for: give a whole number of minutes, 0 to %d (7 days).", maxMinutes))
		return
	}
	sp.KeepUp = time.Duration(minutes) * time.Minute
	if req.At != "" {
		if sp.At, err = ParseLocal(strings.TrimSpace(req.At), sp.TimeZone); err != nil {
			c.invalid(w, req.Box, err)
			return
		}
	}
	id, err := c.st.BoxID(r.Context(), user, req.Box)
	if errors.Is(err, ErrNotFound) {
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: fmt.Sprintf("You have no box named %q: reload the page to see your boxes.", req.Box)})
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	sc, err := c.st.Set(r.Context(), user, id, sp)
	switch {
	case errors.Is(err, ErrInvalid):
		c.invalid(w, req.Box, err)
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: fmt.Sprintf("The box %s is gone: reload the page to see your boxes.", req.Box)})
	case err != nil:
		c.fail(w, r, err)
	default:
		c.log.InfoContext(r.Context(), "wake: schedule set in the console", "user", user, "box", id, "schedule", sc.ID)
		server.WriteJSON(w, http.StatusCreated, c.view(sc))
	}
}

// invalid answers err, a FieldError of box's spec, in the form's words.
func (c *Console) invalid(w http.ResponseWriter, box string, err error) {
	var fe *FieldError
	if !errors.As(err, &fe) {
		c.refuse(w, "", "The schedule was refused: "+err.Error())
		return
	}
	switch fe.Field {
	case "box":
		c.refuse(w, "box", box+" "+fe.Rule+".")
	case "keep_up":
		c.refuse(w, "keep_up_minutes", fmt.Sprintf("Keep it up for: give a whole number of minutes, 0 to %d (7 days).", int64(MaxKeepUp/time.Minute)))
	default:
		c.refuse(w, fe.Field, labels[fe.Field]+" "+fe.Rule+".")
	}
}

// refuse answers 400 {error: "invalid", field, message}.
func (c *Console) refuse(w http.ResponseWriter, field, message string) {
	server.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid", "field": field, "message": message})
}

func (c *Console) clear(w http.ResponseWriter, r *http.Request, user string) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		server.WriteJSON(w, http.StatusBadRequest, console.Refusal{Error: "bad_request", Message: "That is not a schedule of yours. Reload the page."})
		return
	}
	box, err := c.st.BoxID(r.Context(), user, r.PathValue("box"))
	if err == nil {
		_, err = c.st.Clear(r.Context(), user, box, id)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		server.WriteJSON(w, http.StatusNotFound, console.Refusal{Error: "not_found", Message: "That schedule is gone already: it was cleared, or its box deleted. Reload the page."})
	case err != nil:
		c.fail(w, r, err)
	default:
		c.log.InfoContext(r.Context(), "wake: schedule cleared in the console", "user", user, "box", box, "schedule", id)
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	c.log.ErrorContext(r.Context(), "schedules call failed", "path", r.URL.Path, "err", err)
	server.WriteJSON(w, http.StatusInternalServerError, console.Refusal{Error: "internal", Message: "The api failed. Try again in a minute."})
}
