package oauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/pgnotify"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// Lifetimes of what the token endpoint issues. A refresh token lives as
// long as its grant (the days the user chose), one use each.
const (
	// AccessTTL is an access token's life: short, so a token copied out
	// of an agent's memory is soon worthless; the agent refreshes.
	AccessTTL = time.Hour
	// CodeTTL is an authorization code's life (one use).
	CodeTTL = 60 * time.Second
)

// Token prefixes: an access token, a refresh token, an authorization
// code; each then 64 lowercase hex digits (32 random bytes).
const (
	AccessPrefix  = "cba_"
	RefreshPrefix = "cbr_"
	CodePrefix    = "cbac_"
)

// Channel is the NOTIFY channel a change to a user's grants goes out on
// (a token issued, a grant revoked); the payload is the user's id, and
// every api reloads that user's grants.
const Channel = "cocoonbox_oauth"

// ErrBadToken is an access token that is malformed, unknown, expired or
// of an ended grant.
var ErrBadToken = errors.New("unknown, expired or revoked access token: the agent must sign in again")

// Grants is the store of grants, codes and tokens, and this api's index
// of the live access tokens: digest → grant, so a check is one map
// lookup and never a query. The index is loaded whole at Start and after a
// lost LISTEN connection, and one user at a time on each NOTIFY on
// Channel (a token issued or a grant revoked on any api) or on
// users.Channel (a user disabled or deleted), as api/tokens' index is.
type Grants struct {
	pool *pgxpool.Pool
	url  string
	log  *slog.Logger
	// Now is the clock of codes and tokens (tests move it).
	Now func() time.Time

	key []byte
	// macs are HMAC-SHA256 states under key, reused (Reset restores the
	// keyed state), so a check allocates nothing for its digest.
	macs sync.Pool

	// reload serializes Reload from its query to its last change, so a
	// snapshot read before a commit is never applied after one read
	// since (a revoked grant would come back until the next reload).
	reload sync.Mutex

	mu       sync.RWMutex
	byDigest map[[32]byte]*access
	byGrant  map[string]*grantEntry
	byUser   map[string]map[string]*grantEntry

	used chan *grantEntry
	stop context.CancelFunc
	done sync.WaitGroup
}

// access is one live access token of the index.
type access struct {
	e       *grantEntry
	expires time.Time
}

// grantEntry is one live grant of the index and its access tokens.
type grantEntry struct {
	g      *Grant
	cancel context.CancelFunc
	timer  *time.Timer
	tokens map[[32]byte]bool
	// lastWrite is when the grant's last use was last queued for writing
	// (unix ns).
	lastWrite atomic.Int64
}

// UseInterval is how often at most a grant's last use is written: the
// Agents page shows it to the minute.
const UseInterval = time.Minute

// NewGrants is the store on pool (migrated with Schema); url is the same
// database's URL, for the connection that LISTENs.
func NewGrants(pool *pgxpool.Pool, url string, log *slog.Logger) *Grants {
	return &Grants{pool: pool, url: url, log: log, Now: time.Now, byDigest: map[[32]byte]*access{},
		byGrant: map[string]*grantEntry{}, byUser: map[string]map[string]*grantEntry{}, used: make(chan *grantEntry, 256)}
}

// loadKey reads the digests' key, making it first when no api has.
func (s *Grants) loadKey(ctx context.Context) error {
	k := make([]byte, 32)
	rand.Read(k)
	if _, err := s.pool.Exec(ctx, `INSERT INTO oauth_key (key) VALUES ($1) ON CONFLICT DO NOTHING`, k); err != nil {
		return fmt.Errorf("oauth: make the key: %w", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT key FROM oauth_key`).Scan(&s.key); err != nil {
		return fmt.Errorf("oauth: read the key: %w", err)
	}
	return nil
}

// digest is what the database keeps of a code or a token: its
// HMAC-SHA256 under oauth_key.
func (s *Grants) digest(secret string) [32]byte {
	m, _ := s.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, s.key)
	}
	m.Reset()
	io.WriteString(m, secret)
	var d [32]byte
	m.Sum(d[:0])
	s.macs.Put(m)
	return d
}

// newSecret is prefix and 64 hex digits of crypto/rand.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// wellFormed says whether s is prefix and 64 lowercase hex digits.
func wellFormed(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != 64 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Check answers the grant of an access token (cba_ + 64 hex): one map
// lookup, no query. A token past its expiry or of an ended grant is
// ErrBadToken. A use is queued for writing to last_used_at at most each
// UseInterval per grant.
func (s *Grants) Check(token string) (*Grant, error) {
	if !wellFormed(token, AccessPrefix) {
		return nil, ErrBadToken
	}
	d := s.digest(token)
	s.mu.RLock()
	a := s.byDigest[d]
	s.mu.RUnlock()
	now := s.Now()
	if a == nil || !now.Before(a.expires) || a.e.g.ctx.Err() != nil {
		return nil, ErrBadToken
	}
	if last := a.e.lastWrite.Load(); now.UnixNano()-last >= int64(UseInterval) && a.e.lastWrite.CompareAndSwap(last, now.UnixNano()) {
		select {
		case s.used <- a.e:
		default: // the writer is behind: a later use will be written
		}
	}
	return a.e.g, nil
}

// Start reads the key, loads the whole index, then keeps it current: a
// LISTEN on Channel and users.Channel, reconnecting with a full reload
// after each reconnect (api/pgnotify), and a sweep of expired entries
// (and prune) each minute.
func (s *Grants) Start(ctx context.Context) error {
	if err := s.loadKey(ctx); err != nil {
		return err
	}
	l, err := pgnotify.Listen(ctx, pgnotify.Config{
		URL: s.url, Channels: []string{Channel, users.Channel}, Name: "oauth index", Everything: "every grant", Log: s.log,
		Reload: s.Reload,
	})
	if err != nil {
		return err
	}
	ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.done.Add(3)
	go func() { defer s.done.Done(); l.Follow(ctx) }()
	go func() { defer s.done.Done(); s.writeUses(ctx) }()
	go func() {
		defer s.done.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sweep()
				if err := s.prune(ctx); err != nil && ctx.Err() == nil {
					s.log.Warn("oauth: prune", "err", err)
				}
			}
		}
	}()
	return nil
}

// Stop ends the LISTEN and every call open under a grant.
func (s *Grants) Stop() {
	if s.stop != nil {
		s.stop()
	}
	s.done.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.byGrant {
		s.dropGrant(id, e)
	}
}

// writeUses writes the queued last uses, one UPDATE each.
func (s *Grants) writeUses(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-s.used:
			at := time.Unix(0, e.lastWrite.Load())
			if _, err := s.pool.Exec(ctx, `UPDATE oauth_grants SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`,
				e.g.ID, at); err != nil && ctx.Err() == nil {
				s.log.Warn("oauth index: write a grant's last use", "grant", e.g.ID, "err", err)
			}
		}
	}
}

// pruneAfter is how long past its end a code or token row is kept.
const pruneAfter = time.Hour

// prune deletes the rows no check needs any more: codes, access tokens,
// and the tokens of an ended grant, each pruneAfter past its end, and the
// pairs the grace window keeps once it is over. A spent refresh token of
// a live grant stays, so its replay is known.
// Every api prunes; the DELETEs are idempotent.
func (s *Grants) prune(ctx context.Context) error {
	before := s.Now().Add(-pruneAfter)
	// The grace window's sealed pairs go once the window is over (the
	// spent token stays, so its replay is still known).
	if _, err := s.pool.Exec(ctx, `UPDATE oauth_tokens SET successor = NULL WHERE successor IS NOT NULL AND used_at < $1`,
		s.Now().Add(-RefreshGrace)); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	for _, q := range []string{
		`DELETE FROM oauth_codes WHERE expires_at < $1`,
		`DELETE FROM oauth_tokens WHERE kind = 'access' AND expires_at < $1`,
		`DELETE FROM oauth_tokens t USING oauth_grants g WHERE t.grant_id = g.id AND (g.revoked_at < $1 OR g.expires_at < $1)`,
	} {
		if _, err := s.pool.Exec(ctx, q, before); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	return nil
}

// sweep drops the access tokens past their expiry.
func (s *Grants) sweep() {
	now := s.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for d, a := range s.byDigest {
		if !now.Before(a.expires) {
			delete(s.byDigest, d)
			delete(a.e.tokens, d)
		}
	}
}

// load reads the live grants and their live access tokens: every user's,
// or one user's. A grant lives while not revoked, not expired, and its
// user enabled.
const load = `
SELECT g.id, u.id::text, u.name, g.client_id, g.client_name, g.verified_host, g.max_boxes, g.max_running, g.expires_at,
       t.digest, t.expires_at
  FROM oauth_grants g JOIN users u ON u.id = g.user_id
  LEFT JOIN oauth_tokens t ON t.grant_id = g.id AND t.kind = 'access' AND t.expires_at > $2
 WHERE g.revoked_at IS NULL AND g.expires_at > $2 AND u.disabled_at IS NULL AND ($1::uuid IS NULL OR g.user_id = $1)`

// Reload makes the index agree with the database for userID ("" for
// every user): new grants and tokens are added, ended grants dropped and
// the calls open under them ended. The store calls it after its own
// commits, so this api needs no round trip through NOTIFY.
func (s *Grants) Reload(ctx context.Context, userID string) error {
	var id pgtype.UUID
	if userID != "" {
		if err := id.Scan(userID); err != nil {
			return fmt.Errorf("oauth index: %q is not a user id", userID)
		}
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	rows, err := s.pool.Query(ctx, load, id, s.Now())
	if err != nil {
		return fmt.Errorf("oauth index: load: %w", err)
	}
	type fresh struct {
		g      Grant
		tokens map[[32]byte]time.Time
	}
	grants := map[string]*fresh{}
	var g Grant
	var digest []byte
	var texp *time.Time
	_, err = pgx.ForEachRow(rows, []any{&g.ID, &g.UserID, &g.UserName, &g.ClientID, &g.ClientName, &g.VerifiedHost,
		&g.MaxBoxes, &g.MaxRunning, &g.ExpiresAt, &digest, &texp}, func() error {
		f := grants[g.ID]
		if f == nil {
			f = &fresh{g: g, tokens: map[[32]byte]time.Time{}}
			grants[g.ID] = f
		}
		if digest != nil {
			if len(digest) != 32 {
				return errors.New("a stored token digest is not 32 bytes")
			}
			f.tokens[[32]byte(digest)] = *texp
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("oauth index: load: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.byGrant
	if userID != "" {
		old = s.byUser[userID]
	}
	for gid, e := range old {
		if f := grants[gid]; f == nil || f.g.UserID != e.g.UserID {
			s.dropGrant(gid, e)
		}
	}
	for gid, f := range grants {
		e := s.byGrant[gid]
		if e == nil {
			e = &grantEntry{tokens: map[[32]byte]bool{}}
			ng := f.g
			ng.ctx, e.cancel = context.WithCancel(context.Background())
			e.g = &ng
			e.timer = time.AfterFunc(time.Until(ng.ExpiresAt), e.cancel)
			s.byGrant[gid] = e
			if s.byUser[ng.UserID] == nil {
				s.byUser[ng.UserID] = map[string]*grantEntry{}
			}
			s.byUser[ng.UserID][gid] = e
		}
		for d := range e.tokens {
			if _, ok := f.tokens[d]; !ok {
				delete(s.byDigest, d)
				delete(e.tokens, d)
			}
		}
		for d, exp := range f.tokens {
			e.tokens[d] = true
			s.byDigest[d] = &access{e: e, expires: exp}
		}
	}
	return nil
}

// dropGrant ends a grant on this api: its tokens leave the index and its
// Done closes. The caller holds mu.
func (s *Grants) dropGrant(id string, e *grantEntry) {
	e.timer.Stop()
	e.cancel()
	for d := range e.tokens {
		delete(s.byDigest, d)
	}
	delete(s.byGrant, id)
	if m := s.byUser[e.g.UserID]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(s.byUser, e.g.UserID)
		}
	}
}

// notify tells every api (this one included, through its LISTEN) that
// userID's grants changed; it goes out when tx commits.
func notify(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, userID); err != nil {
		return fmt.Errorf("notify %s: %w", Channel, err)
	}
	return nil
}

// Revoke ends the grant id of userID at once on every api: its tokens
// stop, its open MCP exchanges end, its boxes stay the user's. Revoking
// an ended or unknown grant changes nothing and is no error.
func (s *Grants) Revoke(ctx context.Context, userID, grantID string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", grantID, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE oauth_grants SET revoked_at = $3 WHERE id = $1 AND user_id::text = $2 AND revoked_at IS NULL`,
		grantID, userID, s.Now()); err != nil {
		return fmt.Errorf("revoke grant %s: %w", grantID, err)
	}
	if err := notify(ctx, tx, userID); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("revoke grant %s: %w", grantID, err)
	}
	return s.Reload(ctx, userID)
}

// LiveGrant says whether userID has a live grant to clientID: the consent
// page says so.
func (s *Grants) LiveGrant(ctx context.Context, userID, clientID string) (bool, error) {
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM oauth_grants WHERE user_id::text = $1 AND client_id = $2
	   AND revoked_at IS NULL AND expires_at > $3)`, userID, clientID, s.Now()).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("look up the live grants of %s: %w", userID, err)
	}
	return live, nil
}
