package console_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/apitest"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
)

// words is a prompt of n words: n prompt tokens at the gw stand-in.
func words(n int) string { return strings.TrimSpace(strings.Repeat("word ", n)) }

// cents is micros as the page must say it, computed apart from the
// api's formatting: to the cent, "under $0.01" for less than half a cent
// above 0.
func cents(micros int64) string {
	if micros > 0 && micros < 5_000 {
		return "under $0.01"
	}
	return fmt.Sprintf("$%.2f", float64(micros)/1e6)
}

// Issue 46, Deliver 2: the Usage page shows the gw stand-in's figures
// for a user whose calls were metered (today, this month, per model,
// against the default cap), and a user over their cap sees $0.00
// remaining and a sentence saying calls are refused until the reset, in
// real Chromium, axe-clean and no wider than 360 px.
func TestTheUsagePageShowsGWsFiguresAgainstTheCap(t *testing.T) {
	t.Parallel()
	g := gwtest.New()
	t.Cleanup(g.Close)
	a := apitest.New(t, apitest.WithGW(g), apitest.WithoutSession())
	ctx := context.Background()
	bob := a.AddUser("bob", false)
	a.AddUser("boss", true)
	boss := a.SignIn("boss")

	// Alice's calls: 4 of the dearer model, 3 of the cheaper one, each a
	// prompt of 1,000 words.
	const prompt = 1000
	key, err := a.Server.Usage.Entry(ctx, a.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[gwtest.Model]int{gwtest.Models[1]: 4, gwtest.Models[0]: 3}
	for m, n := range calls {
		for range n {
			if st, body, err := g.Chat(key.Value, m.ID, words(prompt)); err != nil || st != 200 {
				t.Fatalf("a call of %s: %d %s %v", m.ID, st, body, err)
			}
		}
	}
	today := time.Now().UTC().Format(time.DateOnly)
	spent := g.SpendMicros(a.User.ID, today)
	if spent == 0 {
		t.Fatal("the stand-in metered nothing")
	}
	want := map[string]string{"today": cents(spent), "cap": "$5.00 (the default)", "remaining": cents(5_000_000 - spent), "month": cents(spent)}
	var wantRows [][]string
	for _, m := range gwtest.Models {
		n := int64(calls[m])
		per := n * (prompt*m.PromptMicros + gwtest.CompletionTokens*m.CompletionMicros)
		wantRows = append(wantRows, []string{m.ID, cents(per), cents(per), fmt.Sprint(n), thousands(n*prompt) + " in, " + fmt.Sprint(n*gwtest.CompletionTokens) + " out"})
	}
	slices.SortFunc(wantRows, func(x, y []string) int { return strings.Compare(x[0], y[0]) })

	// Bob's cap is a cent; his calls go on until gw refuses one.
	if resp, body := boss.Send("PATCH", "/cb/api/users/"+bob.ID, "application/json", `{"daily_cap_micros": 10000}`); resp.StatusCode != 200 {
		t.Fatalf("set bob's cap: %d %s", resp.StatusCode, body)
	}
	bobKey, err := a.Server.Usage.Entry(ctx, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	refused := ""
	for i := 0; i < 20 && refused == ""; i++ {
		st, body, err := g.Chat(bobKey.Value, gwtest.Models[1].ID, words(prompt))
		if err != nil {
			t.Fatal(err)
		}
		if st != 200 {
			refused = fmt.Sprintf("%d %s", st, body)
		}
	}
	if !strings.Contains(refused, "budget_exceeded") {
		t.Fatalf("gw never refused bob over his cap (last: %q)", refused)
	}

	u := newUI(t, a.URL)
	u.signIn("alice")
	u.check(pageState{name: "usage", path: "/cb/usage", ready: "remaining today.", shot: true, act: func(u *ui) {
		for id, text := range want {
			if got := u.textOf("#" + id); got != text {
				t.Errorf("alice's page: #%s reads %q; the stand-in's figures make it %q", id, got, text)
			}
		}
		if got := u.rows("#models"); !slices.EqualFunc(got, wantRows, slices.Equal) {
			t.Errorf("alice's models:\n%q\nthe stand-in's figures make them\n%q", got, wantRows)
		}
		var over bool
		u.js(`return !document.getElementById("over").hidden;`, &over)
		if over {
			t.Error("alice, under her cap, is told she is over it")
		}
	}})
	u.signOut()
	u.signIn("bob")
	u.check(pageState{name: "usage-over", path: "/cb/usage", ready: "You have spent today's cap of $0.01", act: func(u *ui) {
		u.waitText("the gateway refuses your boxes' model calls until it resets at 00:00 UTC")
		if remaining := u.textOf("#remaining"); remaining != "$0.00" {
			t.Errorf("bob over his cap sees %q remaining, want $0.00", remaining)
		}
		u.plain("#over")
	}})
}

// thousands is n with a comma between each three digits, as a person
// writes it.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// textOf is the text of the element css names.
func (u *ui) textOf(css string) string {
	u.t.Helper()
	var text string
	u.js(`const e = document.querySelector(arguments[0]); return e ? e.textContent : "(no " + arguments[0] + ")";`, &text, css)
	return text
}

// rows are the texts of the cells of table css's body, row by row.
func (u *ui) rows(css string) [][]string {
	u.t.Helper()
	var rows [][]string
	u.js(`return [...document.querySelectorAll(arguments[0] + " tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent));`, &rows, css)
	return rows
}
