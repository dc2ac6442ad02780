package tokens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonbox/cocoonbox/api/pgnotify"
	"github.com/cocoonbox/cocoonbox/api/users"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// UseInterval is how often at most a token's last use is written.
const UseInterval = time.Minute

// Principal is who a token belongs to. Done is closed when the token stops
// working on this api (revoked, replaced, its user disabled or deleted), so
// every call open on it can end.
type Principal struct {
	UserID   string
	UserName string
	Admin    bool
	// DeviceID is the device token's id (dev_ + 16 hex); "" for the personal token.
	DeviceID string
	// Client is the device's client (cocoonbox-cli, cocoonbox-app); "" for the personal token.
	Client string
	// GrantID is the OAuth grant (api/oauth) of an agent's access token
	// whose check made this principal (ForGrant); "" for the user's own
	// tokens. Check never answers one.
	GrantID string

	ctx context.Context
}

// Done is closed once the token no longer works on this api.
func (p *Principal) Done() <-chan struct{} { return p.ctx.Done() }

// ForGrant is the principal of an OAuth grant's access token, which
// api/oauth checked (the control MCP calls it): the grant's user, its
// Done closed when done ends (the grant revoked, expired, its user
// disabled). It carries no admin right. Check never answers such a
// principal: it refuses cba_ before any lookup.
func ForGrant(userID, userName, grantID string, done context.Context) *Principal {
	return &Principal{UserID: userID, UserName: userName, GrantID: grantID, ctx: done}
}

type entry struct {
	p      Principal
	sum    [32]byte
	cancel context.CancelFunc
	// lastWrite is when the last use was last queued for writing (unix ns).
	lastWrite atomic.Int64
}

// Index is this api's index of the live tokens: SHA-256 → principal. It is
// loaded whole at start and after a lost LISTEN connection, and one user at
// a time on each NOTIFY on users.Channel (every api's revoke, disable,
// delete, new token), so every api drops a revoked token.
type Index struct {
	pool *pgxpool.Pool
	url  string
	log  *slog.Logger
	// Now is the clock of the last-use writes (tests move it).
	Now func() time.Time

	mu     sync.RWMutex
	byHash map[[32]byte]*entry
	// byUser finds a user's entries, so a reload of one user costs their
	// tokens only, not a scan of the index under its write lock.
	byUser map[string]map[[32]byte]*entry

	// reload serializes Reload from its query to its last change, so a
	// snapshot read before a commit is never applied after one read since
	// (a revoked token would work again until the user's next reload).
	// Check never takes it.
	reload sync.Mutex
	// Test hooks, nil outside tests: waiting runs when a Reload finds
	// another one under way and waits for it, loaded between a Reload's
	// query and its first change.
	waiting, loaded func(userID string)

	onChange []func(userID string)
	used     chan *entry
	stop     context.CancelFunc
	done     sync.WaitGroup
}

// NewIndex is an index on pool; url is the same database's URL, for the
// connection that LISTENs (kept apart from the pool).
func NewIndex(pool *pgxpool.Pool, url string, log *slog.Logger) *Index {
	return &Index{pool: pool, url: url, log: log, Now: time.Now, byHash: map[[32]byte]*entry{},
		byUser: map[string]map[[32]byte]*entry{}, used: make(chan *entry, 1024)}
}

// OnChange adds fn to what runs after a user's tokens were reloaded on a
// notification (another api's change, or this one's). Call before Start.
func (ix *Index) OnChange(fn func(userID string)) { ix.onChange = append(ix.onChange, fn) }

// Check answers the principal of bearer (the token without "Bearer "): one
// map lookup, no query, no allocation. Errors: ErrInviteToken and
// ErrAgentToken (refused before any lookup), ErrMalformed, ErrUnknown.
func (ix *Index) Check(bearer string) (*Principal, error) {
	sum, err := parse(bearer)
	if err != nil {
		return nil, err
	}
	ix.mu.RLock()
	e := ix.byHash[sum]
	ix.mu.RUnlock()
	if e == nil {
		return nil, ErrUnknown
	}
	now := ix.Now().UnixNano()
	if last := e.lastWrite.Load(); now-last >= int64(UseInterval) && e.lastWrite.CompareAndSwap(last, now) {
		select {
		case ix.used <- e:
		default: // the writer is behind: this use goes unrecorded, a later one will be
		}
	}
	return &e.p, nil
}

// Start loads the whole index, then keeps it current: a LISTEN on
// users.Channel (reconnecting, with a full reload after each reconnect;
// api/pgnotify) and the writer of last uses. It returns once the first
// load is done.
func (ix *Index) Start(ctx context.Context) error {
	l, err := pgnotify.Listen(ctx, pgnotify.Config{
		URL: ix.url, Channels: []string{users.Channel}, Name: "token index", Everything: "every token", Log: ix.log,
		Reload: ix.Reload,
		Notified: func(userID string) {
			for _, fn := range ix.onChange {
				fn(userID)
			}
		},
	})
	if err != nil {
		return err
	}
	ctx, ix.stop = context.WithCancel(context.WithoutCancel(ctx))
	ix.done.Add(2)
	go func() { defer ix.done.Done(); l.Follow(ctx) }()
	go func() { defer ix.done.Done(); ix.writeUses(ctx) }()
	return nil
}

// Stop ends the LISTEN and the writer, and every call open on a token.
func (ix *Index) Stop() {
	if ix.stop != nil {
		ix.stop()
	}
	ix.done.Wait()
	ix.mu.Lock()
	for _, e := range ix.byHash {
		e.cancel()
	}
	clear(ix.byHash)
	clear(ix.byUser)
	ix.mu.Unlock()
}

// loadAll and loadUser read the live tokens: every user's, or one user's
// (by the primary key and user_tokens_user_id, so a notification costs that user's rows).
const (
	loadAll = `
SELECT u.id::text, u.name, u.admin, u.token_sha256, '', '' FROM users u
 WHERE u.disabled_at IS NULL AND u.token_sha256 IS NOT NULL
UNION ALL
SELECT u.id::text, u.name, u.admin, t.sha256, t.id, t.client FROM user_tokens t JOIN users u ON u.id = t.user_id
 WHERE u.disabled_at IS NULL`
	loadUser = `
SELECT u.id::text, u.name, u.admin, u.token_sha256, '', '' FROM users u
 WHERE u.id = $1 AND u.disabled_at IS NULL AND u.token_sha256 IS NOT NULL
UNION ALL
SELECT u.id::text, u.name, u.admin, t.sha256, t.id, t.client FROM user_tokens t JOIN users u ON u.id = t.user_id
 WHERE t.user_id = $1 AND u.disabled_at IS NULL`
)

// Reload makes the index agree with the database for userID ("" for every
// user): new tokens are added, gone ones dropped and the calls open on them
// ended. Stores call it after their own commits, so this api needs no
// round trip through NOTIFY. Reloads run one at a time, each from its
// query to its last change, so the last snapshot applied is the newest.
func (ix *Index) Reload(ctx context.Context, userID string) error {
	var id pgtype.UUID
	if userID != "" && id.Scan(userID) != nil {
		return fmt.Errorf("token index: %q is not a user id", userID)
	}
	if !ix.reload.TryLock() {
		if ix.waiting != nil {
			ix.waiting(userID)
		}
		ix.reload.Lock()
	}
	defer ix.reload.Unlock()
	var rows pgx.Rows
	var err error
	if userID == "" {
		rows, err = ix.pool.Query(ctx, loadAll)
	} else {
		rows, err = ix.pool.Query(ctx, loadUser, id)
	}
	if err != nil {
		return fmt.Errorf("token index: load: %w", err)
	}
	fresh := map[[32]byte]Principal{}
	var sum []byte
	var p Principal
	_, err = pgx.ForEachRow(rows, []any{&p.UserID, &p.UserName, &p.Admin, &sum, &p.DeviceID, &p.Client}, func() error {
		if len(sum) != 32 {
			return errors.New("a stored token hash is not 32 bytes")
		}
		fresh[[32]byte(sum)] = p
		return nil
	})
	if err != nil {
		return fmt.Errorf("token index: load: %w", err)
	}
	if ix.loaded != nil {
		ix.loaded(userID)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	old := ix.byHash
	if userID != "" {
		old = ix.byUser[userID]
	}
	for h, e := range old {
		if np, ok := fresh[h]; ok && samePrincipal(np, e.p) {
			delete(fresh, h) // unchanged: keep the entry, its calls go on
			continue
		}
		e.cancel()
		ix.drop(h, e)
	}
	for h, np := range fresh {
		if e := ix.byHash[h]; e != nil { // a hash that moved to another user: end it there
			e.cancel()
			ix.drop(h, e)
		}
		e := &entry{p: np, sum: h}
		e.p.ctx, e.cancel = context.WithCancel(context.Background())
		ix.byHash[h] = e
		if ix.byUser[np.UserID] == nil {
			ix.byUser[np.UserID] = map[[32]byte]*entry{}
		}
		ix.byUser[np.UserID][h] = e
	}
	return nil
}

// drop removes e from both maps; the caller holds mu.
func (ix *Index) drop(h [32]byte, e *entry) {
	delete(ix.byHash, h)
	if m := ix.byUser[e.p.UserID]; m != nil {
		delete(m, h)
		if len(m) == 0 {
			delete(ix.byUser, e.p.UserID)
		}
	}
}

func samePrincipal(a, b Principal) bool {
	return a.UserID == b.UserID && a.UserName == b.UserName && a.Admin == b.Admin && a.DeviceID == b.DeviceID && a.Client == b.Client
}

// Len is how many tokens the index holds.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byHash)
}

// writeUses writes the queued last uses, one UPDATE each.
func (ix *Index) writeUses(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ix.used:
			at := time.Unix(0, e.lastWrite.Load())
			var err error
			if e.p.DeviceID != "" {
				_, err = ix.pool.Exec(ctx, "UPDATE user_tokens SET used_at = $2 WHERE id = $1", e.p.DeviceID, at)
			} else {
				_, err = ix.pool.Exec(ctx, "UPDATE users SET token_used_at = $2 WHERE id = $1 AND token_sha256 = $3", e.p.UserID, at, e.sum[:])
			}
			if err != nil && ctx.Err() == nil {
				ix.log.Warn("token index: write last use", "user", e.p.UserID, "device", e.p.DeviceID, "err", err)
			}
		}
	}
}
