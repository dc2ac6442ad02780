// Package usage is model usage (Contract: Model usage; docs/usage.md):
// each user's one gw key, minted through gw's admin API at the user's
// first box, sealed in the api as a vault value is (api/seal under the user's state key), put on every machine
// of the owner as the host-only claim env entry GWEntry (the supervisor's
// gw door swaps it in for the box's GW_API_KEY=unprovisioned), revoked
// when the user is disabled or deleted; the user's daily cap
// (users.daily_cap_micros, else the default) set at gw as the key's daily
// budget, so gw refuses a call over it; and the user's figures (today,
// this month, per model) read from gw's meter.
package usage

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/gw"
	"github.com/cocoonbox/cocoonbox/api/sandbox"
	"github.com/cocoonbox/cocoonbox/api/seal"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (gw_keys, gw_revoke); they refer to
// users and its daily_cap_micros (signup.Schema first).
var Schema = database.NewSchema("usage_schema_migrations", migrations, "migrations")

// GWEntry is the host-only claim env entry holding the box owner's gw key
// (Contract: Box API keys, Model usage): no hosts and no how, since the
// supervisor's gw door, the box's GW_BASE_URL, is its one destination.
const GWEntry = "CBGW"

// Placeholder is the box's GW_API_KEY (agent.env): the door sends the
// owner's key in its place.
const Placeholder = "unprovisioned"

// DefaultDailyCapMicros is the daily cap of a user whose
// users.daily_cap_micros is NULL, when api.yaml's gw.default_daily_cap_micros
// does not say: $5.
const DefaultDailyCapMicros = 5_000_000

// sealLabel and sealAAD seal a key under the user's state key (api/seal).
const sealLabel = "cocoonbox gw key"

func sealAAD(user string) string { return "gw_keys|" + user + "|key" }

// StateKeys answers a user's state key, made on first use (api/vault's
// Store.StateKey), which a key is sealed under as a vault value is.
type StateKeys interface {
	StateKey(ctx context.Context, owner string) ([]byte, error)
}

// ErrDisabled is a disabled or missing user's key asked for: none is minted.
var ErrDisabled = errors.New("the user is disabled or gone: no gw key")

// Service keeps the users' gw keys and reads their usage.
type Service struct {
	pool       *pgxpool.Pool
	gw         *gw.Client
	keys       StateKeys
	defaultCap int64
	now        func() time.Time
	log        *slog.Logger
}

// New is the service on pool against the gw of client, sealing under the
// users' state keys.
// defaultCap is the cap of users without their own (micro-dollars; 0 is
// DefaultDailyCapMicros); now is the clock days are counted by (nil:
// time.Now).
func New(pool *pgxpool.Pool, client *gw.Client, keys StateKeys, defaultCap int64, now func() time.Time, log *slog.Logger) *Service {
	if defaultCap == 0 {
		defaultCap = DefaultDailyCapMicros
	}
	if now == nil {
		now = time.Now
	}
	return &Service{pool: pool, gw: client, keys: keys, defaultCap: defaultCap, now: now, log: log}
}

// capOf is user's daily cap and whether it is the default; ErrDisabled
// for a disabled or missing user.
func (s *Service) capOf(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, user string) (int64, bool, error) {
	var own *int64
	var disabled bool
	err := q.QueryRow(ctx, "SELECT daily_cap_micros, disabled_at IS NOT NULL FROM users WHERE id = $1", user).Scan(&own, &disabled)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && disabled) {
		return 0, false, ErrDisabled
	}
	if err != nil {
		return 0, false, err
	}
	if own == nil {
		return s.defaultCap, true, nil
	}
	return *own, false, nil
}

// Entry is the claim env entry GWEntry with user's gw key, minted (with
// the user's cap as its daily budget) when the user has none: at the
// user's first box. A cap changed since the key's budget was set is set
// again first. Two apis minting at once keep one key (the other is
// revoked at gw). ErrDisabled for a disabled or missing user.
func (s *Service) Entry(ctx context.Context, user string) (sandbox.ClaimEntry, error) {
	capMicros, _, err := s.capOf(ctx, s.pool, user)
	if err != nil {
		return sandbox.ClaimEntry{}, err
	}
	var token string
	var sealed []byte
	var keyCap int64
	err = s.pool.QueryRow(ctx, "SELECT token, key_sealed, cap_micros FROM gw_keys WHERE user_id = $1", user).Scan(&token, &sealed, &keyCap)
	if errors.Is(err, pgx.ErrNoRows) {
		if token, sealed, err = s.mint(ctx, user, capMicros); err != nil {
			return sandbox.ClaimEntry{}, err
		}
		keyCap = capMicros
	} else if err != nil {
		return sandbox.ClaimEntry{}, err
	}
	if keyCap != capMicros {
		if err := s.setBudget(ctx, user, token, capMicros); err != nil {
			return sandbox.ClaimEntry{}, err
		}
	}
	sk, err := s.keys.StateKey(ctx, user)
	if err != nil {
		return sandbox.ClaimEntry{}, err
	}
	v, err := seal.Open(sk, sealLabel, sealAAD(user), sealed)
	if err != nil {
		return sandbox.ClaimEntry{}, fmt.Errorf("the gw key of user %s %w", user, err)
	}
	return sandbox.ClaimEntry{Name: GWEntry, Value: string(v)}, nil
}

// mint makes user's key at gw and keeps it sealed; a row another api
// inserted first wins, and this key is revoked at gw.
func (s *Service) mint(ctx context.Context, user string, capMicros int64) (string, []byte, error) {
	k, err := s.gw.Generate(ctx, user, "cocoonbox user "+user, capMicros)
	if err != nil {
		return "", nil, fmt.Errorf("mint the gw key of user %s: %w", user, err)
	}
	var sealed []byte
	sk, err := s.keys.StateKey(ctx, user)
	if err == nil {
		sealed = seal.Seal(sk, sealLabel, sealAAD(user), []byte(k.Value))
		var tag interface{ RowsAffected() int64 }
		tag, err = s.pool.Exec(ctx, `INSERT INTO gw_keys (user_id, token, key_sealed, cap_micros) VALUES ($1, $2, $3, $4)
			ON CONFLICT (user_id) DO NOTHING`, user, k.Token, sealed, capMicros)
		if err == nil && tag.RowsAffected() == 1 {
			s.log.Info("usage: gw key minted", "user", user, "cap_micros", capMicros)
			return k.Token, sealed, nil
		}
	}
	if derr := s.gw.Delete(context.WithoutCancel(ctx), k.Token); derr != nil {
		s.log.Warn("usage: a gw key minted in vain could not be revoked", "user", user, "err", derr)
	}
	if err != nil {
		return "", nil, fmt.Errorf("keep the gw key of user %s: %w", user, err)
	}
	var token string
	var theirs []byte
	err = s.pool.QueryRow(ctx, "SELECT token, key_sealed FROM gw_keys WHERE user_id = $1", user).Scan(&token, &theirs)
	return token, theirs, err
}

func (s *Service) setBudget(ctx context.Context, user, token string, capMicros int64) error {
	if err := s.gw.SetBudget(ctx, token, capMicros); err != nil {
		return fmt.Errorf("set the daily cap of user %s at gw: %w", user, err)
	}
	_, err := s.pool.Exec(ctx, "UPDATE gw_keys SET cap_micros = $3 WHERE user_id = $1 AND token = $2", user, token, capMicros)
	return err
}

// PushCap sets user's current cap as their key's daily budget at gw, so
// the next call is judged by it (an admin's PATCH /cb/api/users/{id}
// calls it in its transaction q: a refused push leaves the cap as it
// was). A user without a key has nothing to push: the key is minted with
// the cap of its moment.
func (s *Service) PushCap(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, user string) error {
	capMicros, _, err := s.capOf(ctx, q, user)
	if errors.Is(err, ErrDisabled) {
		return nil
	}
	if err != nil {
		return err
	}
	var token string
	err = q.QueryRow(ctx, "SELECT token FROM gw_keys WHERE user_id = $1", user).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.gw.SetBudget(ctx, token, capMicros); err != nil {
		return fmt.Errorf("set the daily cap of user %s at gw: %w", user, err)
	}
	_, err = s.pool.Exec(ctx, "UPDATE gw_keys SET cap_micros = $3 WHERE user_id = $1 AND token = $2", user, token, capMicros)
	return err
}

// Revoke deletes user's key here and at gw, when the user is disabled:
// their boxes' calls are refused from the next one on (the caller pushes
// the machines' entries without it). An enabled user is left alone. It
// also revokes the keys of deleted users (gw_revoke). It answers whether
// user's key was revoked.
//
// The row goes first, its token into gw_revoke in the same transaction,
// and gw is told after: told first, gw refused the key while the row
// still named it, and an Entry in between (the user enabled again at
// once) handed out the dead key. A gw that fails meanwhile leaves the
// token in gw_revoke, for the next Revoke.
func (s *Service) Revoke(ctx context.Context, user string) (bool, error) {
	if _, _, err := s.capOf(ctx, s.pool, user); !errors.Is(err, ErrDisabled) {
		if err == nil {
			err = s.revokeDeleted(ctx)
		}
		return false, err
	}
	var revoked bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var token string
		err := tx.QueryRow(ctx, "DELETE FROM gw_keys WHERE user_id = $1 RETURNING token", user).Scan(&token)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		revoked = true
		_, err = tx.Exec(ctx, "INSERT INTO gw_revoke (token) VALUES ($1) ON CONFLICT DO NOTHING", token)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("revoke the gw key of user %s: %w", user, err)
	}
	if err := s.revokeDeleted(ctx); err != nil {
		return revoked, fmt.Errorf("revoke the gw key of user %s: %w", user, err)
	}
	if revoked {
		s.log.Info("usage: gw key revoked", "user", user)
	}
	return revoked, nil
}

// revokeDeleted revokes at gw the keys in gw_revoke: those deleted users
// left, and those Revoke took from disabled ones.
func (s *Service) revokeDeleted(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, "SELECT token FROM gw_revoke")
	if err != nil {
		return err
	}
	tokens, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if err := s.gw.Delete(ctx, t); err != nil && !errors.Is(err, gw.ErrNotFound) {
			return fmt.Errorf("revoke a deleted user's gw key: %w", err)
		}
		if _, err := s.pool.Exec(ctx, "DELETE FROM gw_revoke WHERE token = $1", t); err != nil {
			return err
		}
		s.log.Info("usage: a gw key in gw_revoke revoked")
	}
	return nil
}

// Figures are a user's usage as Boxes.Usage answers it (Contract: Model
// usage; docs/usage.md), in micro-dollars; days are UTC days, as gw's
// budgets reset.
type Figures struct {
	Today, Month   int64
	DailyCapMicros int64
	DefaultCap     bool
	// RemainingToday is the cap less today's spend, never below 0.
	RemainingToday int64
	// Models are this month's figures per model, and ModelsToday today's
	// (only when asked).
	Models, ModelsToday map[string]gw.Metered
}

// Figures reads user's usage from gw: today, this month (both UTC) and,
// with perModel, this month per model.
func (s *Service) Figures(ctx context.Context, user string, perModel bool) (Figures, error) {
	capMicros, def, err := s.capOf(ctx, s.pool, user)
	if err != nil {
		return Figures{}, err
	}
	now := s.now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := s.gw.Activity(ctx, user, first, now)
	if err != nil {
		return Figures{}, fmt.Errorf("read the usage of user %s from gw: %w", user, err)
	}
	f := Figures{DailyCapMicros: capMicros, DefaultCap: def}
	if perModel {
		f.Models, f.ModelsToday = map[string]gw.Metered{}, map[string]gw.Metered{}
	}
	today := now.Format(time.DateOnly)
	for _, d := range days {
		f.Month += d.Total.Micros
		if d.Date == today {
			f.Today = d.Total.Micros
		}
		for name, m := range d.Models {
			if perModel {
				mm := f.Models[name]
				mm.Add(m)
				f.Models[name] = mm
				if d.Date == today {
					f.ModelsToday[name] = m
				}
			}
		}
	}
	f.RemainingToday = max(0, capMicros-f.Today)
	return f, nil
}
