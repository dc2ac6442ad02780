// Package gw is the api's client of gw's admin API (Contract: Model
// usage; docs/usage.md): gw, the product's model gateway, is not ours, and
// speaks LiteLLM proxy's virtual keys: POST /key/generate, /key/update,
// /key/{key}/regenerate and /key/delete mint, re-budget, rotate and revoke
// a user's one key, and GET /user/daily/activity reads what gw metered
// per user, day and model. Budgets are USD on the wire and micro-dollars
// here.
package gw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls gw's admin API at BaseURL with the master key.
type Client struct {
	base   string
	master string
	http   *http.Client
}

// New is a client of the gw at base (its origin: the OpenAI API is under
// base/v1) with the admin master key. A nil hc is a client with a 30 s
// timeout.
func New(base, masterKey string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), master: masterKey, http: hc}
}

// Error is gw's answer to a call it refused: the status and OpenAI's
// error body.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gw answered %d %s: %s", e.Status, e.Type, e.Message)
}

// ErrNotFound is gw's 404 (a key it does not know).
var ErrNotFound = errors.New("gw does not know the key")

// Key is a minted or rotated key: its value (the secret, only in the
// answer that made it) and its token (gw's id of it, the value's hash).
type Key struct {
	Value string
	Token string
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.master)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("gw %s %s: %w", method, strings.SplitN(path, "?", 2)[0], err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("gw %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		ge := &Error{Status: resp.StatusCode, Type: e.Error.Type, Message: e.Error.Message}
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %w", ErrNotFound, ge)
		}
		return ge
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("gw %s: the answer is not JSON: %w", path, err)
	}
	return nil
}

// budget is a cap in micro-dollars as max_budget (USD).
func budget(capMicros int64) float64 { return float64(capMicros) / 1e6 }

// Generate mints a key for user with a daily budget of capMicros
// (budget_duration 1d).
func (c *Client) Generate(ctx context.Context, user, alias string, capMicros int64) (Key, error) {
	var out struct {
		Key   string `json:"key"`
		Token string `json:"token"`
	}
	err := c.call(ctx, http.MethodPost, "/key/generate", map[string]any{"user_id": user, "key_alias": alias,
		"max_budget": budget(capMicros), "budget_duration": "1d"}, &out)
	if err == nil && (out.Key == "" || out.Token == "") {
		err = errors.New("gw /key/generate answered no key or token")
	}
	return Key{Value: out.Key, Token: out.Token}, err
}

// SetBudget sets the key's (by token) daily budget to capMicros.
func (c *Client) SetBudget(ctx context.Context, token string, capMicros int64) error {
	var out map[string]any
	return c.call(ctx, http.MethodPost, "/key/update", map[string]any{"key": token, "max_budget": budget(capMicros), "budget_duration": "1d"}, &out)
}

// Regenerate rotates the key (by token): a new value and token, the old
// value refused from now on, the user and budget kept.
func (c *Client) Regenerate(ctx context.Context, token string) (Key, error) {
	var out struct {
		Key   string `json:"key"`
		Token string `json:"token"`
	}
	err := c.call(ctx, http.MethodPost, "/key/"+url.PathEscape(token)+"/regenerate", map[string]any{}, &out)
	if err == nil && (out.Key == "" || out.Token == "") {
		err = errors.New("gw /key/regenerate answered no key or token")
	}
	return Key{Value: out.Key, Token: out.Token}, err
}

// Delete revokes the key (by token). A key gw does not know is no error:
// it is revoked already.
func (c *Client) Delete(ctx context.Context, token string) error {
	var out map[string]any
	return c.call(ctx, http.MethodPost, "/key/delete", map[string]any{"keys": []string{token}}, &out)
}

// Metered is what gw metered: cost in micro-dollars, tokens and requests.
type Metered struct {
	Micros           int64 `json:"micros"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	Requests         int64 `json:"requests"`
}

// Add adds o to m.
func (m *Metered) Add(o Metered) {
	m.Micros += o.Micros
	m.PromptTokens += o.PromptTokens
	m.CompletionTokens += o.CompletionTokens
	m.Requests += o.Requests
}

// Day is one UTC day of a user's activity: the whole and per model.
type Day struct {
	Date   string // 2006-01-02
	Total  Metered
	Models map[string]Metered
}

// Activity is user's metered days from..to (UTC days, both included),
// oldest first. Each day's Total is the sum of its models (gw's floats
// rounded to micro-dollars per model, so the sums agree to the micro).
func (c *Client) Activity(ctx context.Context, user string, from, to time.Time) ([]Day, error) {
	type metrics struct {
		Spend            float64 `json:"spend"`
		PromptTokens     int64   `json:"prompt_tokens"`
		CompletionTokens int64   `json:"completion_tokens"`
		APIRequests      int64   `json:"api_requests"`
	}
	var out struct {
		Results []struct {
			Date      string `json:"date"`
			Breakdown struct {
				Models map[string]struct {
					Metrics metrics `json:"metrics"`
				} `json:"models"`
			} `json:"breakdown"`
		} `json:"results"`
	}
	q := url.Values{"user_id": {user}, "start_date": {from.UTC().Format(time.DateOnly)}, "end_date": {to.UTC().Format(time.DateOnly)}, "page_size": {"1000"}}
	if err := c.call(ctx, http.MethodGet, "/user/daily/activity?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	days := make([]Day, 0, len(out.Results))
	for _, r := range out.Results {
		d := Day{Date: r.Date, Models: map[string]Metered{}}
		for name, m := range r.Breakdown.Models {
			mm := Metered{Micros: int64(math.Round(m.Metrics.Spend * 1e6)), PromptTokens: m.Metrics.PromptTokens,
				CompletionTokens: m.Metrics.CompletionTokens, Requests: m.Metrics.APIRequests}
			d.Models[name] = mm
			d.Total.Add(mm)
		}
		days = append(days, d)
	}
	return days, nil
}
