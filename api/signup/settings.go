package signup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Settings are signup_settings' one row (Contract: Sign-in with GitHub and
// signup, "An admin sets signup_settings on the admin page"): off by
// default, invite-only by default, and what a signup account gets.
type Settings struct {
	Enabled    bool `json:"enabled"`
	InviteOnly bool `json:"invite_only"`
	// Seats is how many enabled non-admin accounts admission fills up to.
	Seats int `json:"seats"`
	// AllowDomains and AllowEmails: an email is allowed when its domain or
	// itself is listed; both empty allow everyone.
	AllowDomains []string `json:"allow_domains"`
	AllowEmails  []string `json:"allow_emails"`
	// DailyCapMicros is a signup account's own gw daily cap (default $1).
	DailyCapMicros int64 `json:"daily_cap_micros"`
	// MaxAgentBoxes is a signup account's users.max_agent_boxes (default 1).
	MaxAgentBoxes int `json:"max_agent_boxes"`
	// HourlyAccounts is the hourly brake: at most this many admissions in
	// any hour (default 50).
	HourlyAccounts int `json:"hourly_accounts"`
}

// The settings' ranges, checked by a PUT (and by the table's CHECKs).
const (
	MaxSeats          = 1_000_000
	MaxDailyCapMicros = 1_000_000_000 // $1000
	MaxAgentBoxes     = 64
	MaxHourlyAccounts = 100_000
	maxAllowEntries   = 1000
)

// ErrInvalid is bad input of an admin call: a 400 naming the key and rule.
var ErrInvalid = errors.New("invalid")

const settingsColumns = "enabled, invite_only, seats, allow_domains, allow_emails, daily_cap_micros, max_agent_boxes, hourly_accounts"

func scanSettings(row pgx.Row) (Settings, error) {
	var s Settings
	err := row.Scan(&s.Enabled, &s.InviteOnly, &s.Seats, &s.AllowDomains, &s.AllowEmails, &s.DailyCapMicros, &s.MaxAgentBoxes, &s.HourlyAccounts)
	return s, err
}

// readSettings reads the row; lock takes it FOR UPDATE (admission's lock).
func readSettings(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, lock bool) (Settings, error) {
	sql := "SELECT " + settingsColumns + " FROM signup_settings"
	if lock {
		sql += " FOR UPDATE"
	}
	s, err := scanSettings(q.QueryRow(ctx, sql))
	if err != nil {
		return s, fmt.Errorf("read signup_settings: %w", err)
	}
	return s, nil
}

// Settings answers the current settings.
func (s *Signup) Settings(ctx context.Context) (Settings, error) {
	return readSettings(ctx, s.pool, false)
}

// settingsKeys are the keys a PUT may carry, an allow-list.
var settingsKeys = []string{"enabled", "invite_only", "seats", "allow_domains", "allow_emails", "daily_cap_micros", "max_agent_boxes", "hourly_accounts"}

// applySettings sets on cur the keys of body, a JSON object: a key not in
// settingsKeys, a value of the wrong type or out of range is ErrInvalid
// naming it (every unknown key at once). The keys not given are kept.
func applySettings(cur Settings, body []byte) (Settings, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil || m == nil {
		return cur, fmt.Errorf("%w: the body is one JSON object of the settings' keys (%s)", ErrInvalid, strings.Join(settingsKeys, ", "))
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(settingsKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return cur, fmt.Errorf("%w: unknown key %s (the keys are %s)", ErrInvalid, strings.Join(quoteAll(unknown), ", "), strings.Join(settingsKeys, ", "))
	}
	set := func(key string, v any) error {
		raw, ok := m[key]
		if !ok {
			return nil
		}
		if string(raw) == "null" {
			return fmt.Errorf("%w: %s: null is not a value", ErrInvalid, key)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%w: %s: %s", ErrInvalid, key, typeName(v))
		}
		return nil
	}
	next := cur
	for _, e := range []struct {
		key string
		v   any
	}{{"enabled", &next.Enabled}, {"invite_only", &next.InviteOnly}, {"seats", &next.Seats},
		{"allow_domains", &next.AllowDomains}, {"allow_emails", &next.AllowEmails},
		{"daily_cap_micros", &next.DailyCapMicros}, {"max_agent_boxes", &next.MaxAgentBoxes}, {"hourly_accounts", &next.HourlyAccounts}} {
		if err := set(e.key, e.v); err != nil {
			return cur, err
		}
	}
	if err := next.check(); err != nil {
		return cur, err
	}
	return next, nil
}

func typeName(v any) string {
	switch v.(type) {
	case *bool:
		return "true or false"
	case *int, *int64:
		return "a whole number"
	default:
		return "a list of strings"
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// domainRule is a DNS name in lowercase: labels of a-z, 0-9 and '-', dots between.
var domainRule = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// check names the first key out of range, lowercasing and sorting the lists.
func (s *Settings) check() error {
	rng := func(key string, v, lo, hi int64) error {
		if v < lo || v > hi {
			return fmt.Errorf("%w: %s is %d to %d, not %d", ErrInvalid, key, lo, hi, v)
		}
		return nil
	}
	if err := errors.Join(rng("seats", int64(s.Seats), 0, MaxSeats),
		rng("daily_cap_micros", s.DailyCapMicros, 1, MaxDailyCapMicros),
		rng("max_agent_boxes", int64(s.MaxAgentBoxes), 1, MaxAgentBoxes),
		rng("hourly_accounts", int64(s.HourlyAccounts), 1, MaxHourlyAccounts)); err != nil {
		return err
	}
	if len(s.AllowDomains) > maxAllowEntries || len(s.AllowEmails) > maxAllowEntries {
		return fmt.Errorf("%w: allow_domains and allow_emails hold at most %d entries each", ErrInvalid, maxAllowEntries)
	}
	for i, d := range s.AllowDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if len(d) > 253 || !domainRule.MatchString(d) {
			return fmt.Errorf("%w: allow_domains: %q is not a domain name (example.com)", ErrInvalid, d)
		}
		s.AllowDomains[i] = d
	}
	for i, e := range s.AllowEmails {
		e = strings.ToLower(strings.TrimSpace(e))
		a, err := mail.ParseAddress(e)
		if err != nil || a.Address != e || len(e) > 254 {
			return fmt.Errorf("%w: allow_emails: %q is not an email address (name@example.com)", ErrInvalid, e)
		}
		s.AllowEmails[i] = e
	}
	s.AllowDomains = dedupe(s.AllowDomains)
	s.AllowEmails = dedupe(s.AllowEmails)
	return nil
}

func dedupe(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	sort.Strings(ss)
	return slices.Compact(ss)
}

// allows reports whether the settings' allowlists let email in: both
// empty allow everyone; else its domain or the address must be listed.
func (s Settings) allows(email string) bool {
	if len(s.AllowDomains) == 0 && len(s.AllowEmails) == 0 {
		return true
	}
	email = strings.ToLower(email)
	if slices.Contains(s.AllowEmails, email) {
		return true
	}
	at := strings.LastIndexByte(email, '@')
	return at >= 0 && slices.Contains(s.AllowDomains, email[at+1:])
}

// PutSettings replaces the settings with body's keys over the current ones
// (a PUT: unknown keys and ranges are ErrInvalid, nothing changed), then
// runs admission: a setting may have opened seats.
func (s *Signup) PutSettings(ctx context.Context, body []byte) (Settings, error) {
	var next Settings
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := readSettings(ctx, tx, true)
		if err != nil {
			return err
		}
		if next, err = applySettings(cur, body); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE signup_settings SET enabled = $1, invite_only = $2, seats = $3, allow_domains = $4, allow_emails = $5,
			daily_cap_micros = $6, max_agent_boxes = $7, hourly_accounts = $8, updated_at = now()`,
			next.Enabled, next.InviteOnly, next.Seats, next.AllowDomains, next.AllowEmails, next.DailyCapMicros, next.MaxAgentBoxes, next.HourlyAccounts)
		return err
	})
	if err != nil {
		return Settings{}, fmt.Errorf("set signup_settings: %w", err)
	}
	s.admitLogged(ctx, "settings changed")
	return next, nil
}
