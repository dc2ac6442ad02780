package usage

import (
	_ "embed"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/server"
)

// Console serves the console's Usage page and its call (Contract: Model
// usage; issue 46, Deliver 2; docs/usage.md), for the user of the console
// session, from Service.Figures, which Boxes.Usage and the control MCP's
// usage tool answer from too:
//
//	GET /cb/api/usage   200 Report; 503 unavailable when gw does not answer
//
// Without a session it answers 401. The page computes no figure: each is
// in the answer in micro-dollars and as a person says it (Said).
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

var (
	//go:embed usage.html
	usageHTML string
	//go:embed usage.js
	usageJS []byte
)

// Page is the Usage page, which the console serves at /cb/usage.
var Page = console.Page{Title: "Usage", Main: template.HTML(usageHTML), Script: console.Asset{Name: "usage.js", Body: usageJS}}

// Mount puts the route on mux.
func (c *Console) Mount(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /cb/api/usage", c.session.Calls(c.report))
}

// Report is GET /cb/api/usage's answer: Figures with Boxes.Usage's field
// names, OverCap when no spend is left today (gw refuses the next call),
// Said the same figures in words, and this month's models by name.
type Report struct {
	TodayMicros          int64 `json:"today_micros"`
	MonthMicros          int64 `json:"month_micros"`
	DailyCapMicros       int64 `json:"daily_cap_micros"`
	DefaultCap           bool  `json:"default_cap"`
	RemainingTodayMicros int64 `json:"remaining_today_micros"`
	OverCap              bool  `json:"over_cap"`
	// Said: "today", "month", "daily_cap", "remaining_today" in Dollars.
	Said   map[string]string `json:"said"`
	Models []ModelReport     `json:"models"`
}

// ModelReport is one model's figures: today and this month (UTC).
type ModelReport struct {
	Model            string `json:"model"`
	TodayMicros      int64  `json:"today_micros"`
	MonthMicros      int64  `json:"month_micros"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	// Said: "today", "month" (Dollars), "requests" ("1,000") and
	// "tokens" ("31,050 in, 70 out"), this month's counts.
	Said map[string]string `json:"said"`
}

func (c *Console) report(w http.ResponseWriter, r *http.Request, user string) {
	f, err := c.svc.Figures(r.Context(), user, true)
	if err != nil {
		c.log.WarnContext(r.Context(), "usage: the console's figures not read", "user", user, "err", err)
		server.WriteJSON(w, http.StatusServiceUnavailable, console.Refusal{Error: "unavailable",
			Message: "The model gateway did not answer, so your usage cannot be shown now. Try again in a minute."})
		return
	}
	server.WriteJSON(w, http.StatusOK, NewReport(f))
}

// NewReport is f as the console shows it.
func NewReport(f Figures) Report {
	out := Report{TodayMicros: f.Today, MonthMicros: f.Month, DailyCapMicros: f.DailyCapMicros, DefaultCap: f.DefaultCap,
		RemainingTodayMicros: f.RemainingToday, OverCap: f.RemainingToday == 0,
		Said: map[string]string{"today": Dollars(f.Today), "month": Dollars(f.Month), "daily_cap": Dollars(f.DailyCapMicros),
			"remaining_today": Dollars(f.RemainingToday)},
		Models: []ModelReport{}}
	for _, name := range slices.Sorted(maps.Keys(f.Models)) {
		m, t := f.Models[name], f.ModelsToday[name]
		out.Models = append(out.Models, ModelReport{Model: name, TodayMicros: t.Micros, MonthMicros: m.Micros, Requests: m.Requests,
			PromptTokens: m.PromptTokens, CompletionTokens: m.CompletionTokens,
			Said: map[string]string{"today": Dollars(t.Micros), "month": Dollars(m.Micros), "requests": grouped(m.Requests),
				"tokens": grouped(m.PromptTokens) + " in, " + grouped(m.CompletionTokens) + " out"}})
	}
	return out
}

// Dollars is micros (micro-dollars, >= 0) as a person says an amount of
// US dollars: to the cent ("$0.00", "$4.97", "$1,000.00"), rounded half
// up, and "under $0.01" for a spend above 0 that rounds to no cent.
func Dollars(micros int64) string {
	cents := (micros + 5_000) / 10_000
	if micros > 0 && cents == 0 {
		return "under $0.01"
	}
	c := strconv.FormatInt(cents%100, 10)
	if len(c) == 1 {
		c = "0" + c
	}
	return "$" + grouped(cents/100) + "." + c
}

// grouped is n >= 0 with a comma between each three digits: "31,050".
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
