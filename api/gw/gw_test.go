package gw_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonbox/cocoonbox/api/gw"
	"github.com/cocoonbox/cocoonbox/api/gw/gwtest"
)

// chat makes one chat completion with key and answers the status and
// body.
func chat(t *testing.T, g *gwtest.Server, key, model, prompt string) (int, string) {
	t.Helper()
	st, body, err := g.Chat(key, model, prompt)
	if err != nil {
		t.Fatal(err)
	}
	return st, body
}

var main, computer = gwtest.Models[0], gwtest.Models[1]

// A completion costs its prompt's words at the prompt price and
// CompletionTokens at the completion price.
func cost(m gwtest.Model, words int64) int64 {
	return words*m.PromptMicros + gwtest.CompletionTokens*m.CompletionMicros
}

func TestAKeyMintedThroughTheAdminAPIIsMeteredPerModelAndRefusedOverItsDailyBudget(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	c := gw.New(g.URL, g.MasterKey, nil)
	ctx := context.Background()
	k, err := c.Generate(ctx, "u1", "alias", cost(main, 3)+cost(computer, 2))
	if err != nil {
		t.Fatal(err)
	}
	if st, body := chat(t, g, k.Value, main.ID, "one two three"); st != 200 || !strings.Contains(body, `"prompt_tokens":3`) {
		t.Fatalf("first call: %d %s", st, body)
	}
	if st, body := chat(t, g, k.Value, computer.ID, "one two"); st != 200 {
		t.Fatalf("second call: %d %s", st, body)
	}
	// The budget is spent: the next call is refused, OpenAI's error body
	// with LiteLLM's type.
	st, body := chat(t, g, k.Value, main.ID, "x")
	var e struct {
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); st != 400 || err != nil || e.Error.Type != "budget_exceeded" || !strings.Contains(e.Error.Message, "Budget has been exceeded") {
		t.Fatalf("a call over the budget: %d %s", st, body)
	}
	today := time.Now().UTC()
	days, err := c.Activity(ctx, "u1", today.AddDate(0, 0, -1), today)
	if err != nil || len(days) != 1 {
		t.Fatalf("activity: %+v %v", days, err)
	}
	d := days[0]
	if d.Total.Micros != cost(main, 3)+cost(computer, 2) || d.Models[main.ID].Micros != cost(main, 3) || d.Models[computer.ID].PromptTokens != 2 ||
		d.Total.Requests != 2 || d.Total.Micros != g.SpendMicros("u1", today.Format(time.DateOnly)) {
		t.Fatalf("activity %+v; the stand-in metered %d", d, g.SpendMicros("u1", today.Format(time.DateOnly)))
	}
	// A raised budget holds for the next call.
	if err := c.SetBudget(ctx, k.Token, 1_000_000); err != nil {
		t.Fatal(err)
	}
	if st, body := chat(t, g, k.Value, main.ID, "x"); st != 200 {
		t.Fatalf("after the raise: %d %s", st, body)
	}
	// The budget is per UTC day: tomorrow starts at zero.
	if err := c.SetBudget(ctx, k.Token, 1); err != nil {
		t.Fatal(err)
	}
	if st, _ := chat(t, g, k.Value, main.ID, "x"); st != 400 {
		t.Fatalf("over a budget of 1 micro-dollar: %d", st)
	}
	g.SetClock(func() time.Time { return time.Now().Add(24 * time.Hour) })
	if st, body := chat(t, g, k.Value, main.ID, "x"); st != 200 {
		t.Fatalf("the next day: %d %s", st, body)
	}
}

func TestARotatedKeyRefusesTheOldValueAndADeletedKeyRefusesAll(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	c := gw.New(g.URL, g.MasterKey, nil)
	ctx := context.Background()
	k, err := c.Generate(ctx, "u1", "", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Regenerate(ctx, k.Token)
	if err != nil || n.Value == k.Value || n.Token == k.Token {
		t.Fatalf("regenerate: %+v %v", n, err)
	}
	if st, _ := chat(t, g, k.Value, main.ID, "x"); st != 401 {
		t.Fatalf("the old value after the rotation: %d, want 401", st)
	}
	if st, body := chat(t, g, n.Value, main.ID, "x"); st != 200 {
		t.Fatalf("the new value: %d %s", st, body)
	}
	if err := c.Delete(ctx, n.Token); err != nil {
		t.Fatal(err)
	}
	if st, _ := chat(t, g, n.Value, main.ID, "x"); st != 401 {
		t.Fatalf("a deleted key: %d, want 401", st)
	}
	if _, err := c.Regenerate(ctx, n.Token); !errors.Is(err, gw.ErrNotFound) {
		t.Fatalf("regenerate a deleted key: %v, want ErrNotFound", err)
	}
}

// Control: the admin API refuses any bearer but the master key, and
// a user's key reaches the OpenAI API only.
func TestTheAdminAPINeedsTheMasterKey(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	ctx := context.Background()
	k, err := gw.New(g.URL, g.MasterKey, nil).Generate(ctx, "u1", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	var ge *gw.Error
	if _, err := gw.New(g.URL, k.Value, nil).Generate(ctx, "u2", "", 1); !errors.As(err, &ge) || ge.Status != 401 {
		t.Fatalf("a user's key on /key/generate: %v, want 401", err)
	}
}

// The stand-in meters many calls at once without losing one.
func TestConcurrentCallsAreAllMetered(t *testing.T) {
	g := gwtest.New()
	defer g.Close()
	c := gw.New(g.URL, g.MasterKey, nil)
	k, err := c.Generate(context.Background(), "u1", "", 1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if st, body := chat(t, g, k.Value, main.ID, "a b"); st != 200 {
					t.Errorf("%d %s", st, body)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := g.SpendMicros("u1", time.Now().UTC().Format(time.DateOnly)), 200*cost(main, 2); got != want {
		t.Fatalf("metered %d, want %d", got, want)
	}
}
