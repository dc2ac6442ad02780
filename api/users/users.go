// Package users keeps the api's accounts: their names, argon2id password
// hashes, the admin flag and disable/enable/delete. Its migrations
// (users_schema_migrations) also hold the personal token's hash and, as
// the contract numbers it, migration 0009's user_tokens (package tokens).
package users

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the users package's migrations and their table.
var Schema = database.NewSchema("users_schema_migrations", migrations, "migrations")

// Channel is the PostgreSQL NOTIFY channel a change to a user's sign-ins
// goes out on (Contract: Browser sign-in and device tokens: "A revoke
// notifies cocoonbox_users"); the payload is the user's id, and every api
// reloads that user's tokens.
const Channel = "cocoonbox_users"

// Errors of the store, each wrapped with the name concerned.
var (
	ErrNotFound       = errors.New("no such user")
	ErrExists         = errors.New("user exists")
	ErrBadName        = errors.New("bad user name")
	ErrBadPassword    = errors.New("bad password")
	ErrBadCredentials = errors.New("wrong user name or password")
	ErrDisabled       = errors.New("user disabled")
)

// nameRule is the user name grammar: 1 to 39 of a-z, 0-9, '-' and '_',
// starting with a letter or digit (a lowercased GitHub login fits).
var nameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,38}$`)

// CheckName names the rule a user name breaks, or returns nil.
func CheckName(name string) error {
	if !nameRule.MatchString(name) {
		return fmt.Errorf("%w %q: a user name is 1 to 39 of a-z, 0-9, '-' and '_', starting with a letter or digit", ErrBadName, name)
	}
	return nil
}

// User is one account as the store answers it.
type User struct {
	ID        string    `json:"id"` // a UUID
	Name      string    `json:"name"`
	Admin     bool      `json:"admin"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

// Store reads and changes accounts in the database.
type Store struct {
	pool *pgxpool.Pool
	// KDF hashes new passwords (DefaultKDF unless a test makes it cheaper).
	KDF KDF
	// dummy is a hash to verify against for an unknown name, so timing tells nothing.
	dummy     string
	dummyOnce sync.Once
	// hashing holds a place for each password check running (Authenticate).
	hashing chan struct{}
}

// NewStore is a store on pool with DefaultKDF, checking at most
// MaxHashing passwords at once.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, KDF: DefaultKDF, hashing: make(chan struct{}, MaxHashing)}
}

// MaxHashing is how many password checks (argon2id, DefaultKDF's 64 MiB
// each) a store runs at once: the cores' number, more would only wait for
// a core while holding their memory. Thirty wrong sign-ins at once took
// the api to ~2 GB before.
var MaxHashing = runtime.NumCPU()

// HashWait is how long a sign-in waits for a place among MaxHashing
// before it is ErrBusy.
const HashWait = 2 * time.Second

// ErrBusy is Authenticate's answer when MaxHashing password checks were
// running for all of HashWait: nothing was checked; the caller answers
// 429 and asks the client to come back in a second (Retry-After).
var ErrBusy = errors.New("too many sign-ins at once: try again in a second")

// startHash takes a place among MaxHashing, waiting up to HashWait; the
// returned func gives it back.
func (s *Store) startHash(ctx context.Context) (func(), error) {
	t := time.NewTimer(HashWait)
	defer t.Stop()
	select {
	case s.hashing <- struct{}{}:
		return func() {
			<-s.hashing
			// The hash's 64 MiB are garbage now: given back at once, the
			// resident set stays near MaxHashing hashes' memory; left to
			// the GC's pace, garbage of finished hashes piled up beside
			// the running ones (5 hashes' worth with 2 running).
			debug.FreeOSMemory()
		}, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

const columns = "id, name, admin, disabled_at IS NOT NULL, created_at"

func scan(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Name, &u.Admin, &u.Disabled, &u.CreatedAt)
	return u, err
}

// Add makes an account. Errors: ErrBadName, ErrBadPassword, ErrExists.
func (s *Store) Add(ctx context.Context, name, password string, admin bool) (User, error) {
	if err := CheckName(name); err != nil {
		return User{}, err
	}
	if err := CheckPassword(password); err != nil {
		return User{}, err
	}
	u, err := scan(s.pool.QueryRow(ctx, "INSERT INTO users (name, password_hash, admin) VALUES ($1, $2, $3) RETURNING "+columns,
		name, s.KDF.Hash(password), admin))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return User{}, fmt.Errorf("%w: %q", ErrExists, name)
	}
	if err != nil {
		return User{}, fmt.Errorf("add user %q: %w", name, err)
	}
	return u, nil
}

// List answers every account, by name.
func (s *Store) List(ctx context.Context) ([]User, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+columns+" FROM users ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return list, nil
}

// ByName answers one account; ErrNotFound when there is none.
func (s *Store) ByName(ctx context.Context, name string) (User, error) {
	return s.one(ctx, "name", name)
}

// ByID answers one account; ErrNotFound when there is none.
func (s *Store) ByID(ctx context.Context, id string) (User, error) {
	return s.one(ctx, "id::text", id)
}

func (s *Store) one(ctx context.Context, col, v string) (User, error) {
	u, err := scan(s.pool.QueryRow(ctx, "SELECT "+columns+" FROM users WHERE "+col+" = $1", v))
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("%w: %q", ErrNotFound, v)
	}
	if err != nil {
		return User{}, fmt.Errorf("user %q: %w", v, err)
	}
	return u, nil
}

// Authenticate checks a console sign-in. An unknown name, an account
// without a password (made through GitHub) and a wrong password are all
// ErrBadCredentials and cost the same hashing; a right
// password of a disabled account is ErrDisabled. At most MaxHashing run
// at once; past HashWait waiting for a place it is ErrBusy.
func (s *Store) Authenticate(ctx context.Context, name, password string) (User, error) {
	done, err := s.startHash(ctx)
	if err != nil {
		return User{}, err
	}
	defer done()
	// The dummy is made by the first sign-in of any name: made by the first
	// unknown one only, it would cost that one a hash more than a known
	// name's.
	s.dummyOnce.Do(func() { s.dummy = s.KDF.Hash("no such user") })
	var hash *string
	var u User
	err = pgx.ErrNoRows
	// A name PostgreSQL's text cannot hold (a NUL, bad UTF-8: a 500 of
	// the sign-in before) is no account's: refused as an unknown one.
	if utf8.ValidString(name) && !strings.ContainsRune(name, 0) {
		err = s.pool.QueryRow(ctx, "SELECT password_hash, "+columns+" FROM users WHERE name = $1", name).
			Scan(&hash, &u.ID, &u.Name, &u.Admin, &u.Disabled, &u.CreatedAt)
	}
	// An account made through GitHub (users 0012: idp set) has no
	// password: refused as an unknown name is, at the same cost.
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && hash == nil) || len(password) > MaxPassword {
		Verify(s.dummy, password)
		return User{}, ErrBadCredentials
	}
	if err != nil {
		return User{}, fmt.Errorf("sign in %q: %w", name, err)
	}
	ok, err := Verify(*hash, password)
	if err != nil {
		return User{}, fmt.Errorf("sign in %q: %w", name, err)
	}
	if !ok {
		return User{}, ErrBadCredentials
	}
	if u.Disabled {
		return User{}, fmt.Errorf("%w: %q", ErrDisabled, name)
	}
	return u, nil
}

// SetPassword replaces an account's password; its tokens stay (Contract:
// "changing the password leaves device tokens alone").
func (s *Store) SetPassword(ctx context.Context, name, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, "UPDATE users SET password_hash = $2 WHERE name = $1", name, s.KDF.Hash(password))
	if err != nil {
		return fmt.Errorf("set password of %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return nil
}

// SetDisabled disables or enables an account. A disabled account's tokens
// stop working on every api at once (a NOTIFY on Channel in the same
// transaction) and come back with its enable.
func (s *Store) SetDisabled(ctx context.Context, name string, disabled bool) (User, error) {
	var u User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		u, err = scan(tx.QueryRow(ctx, `UPDATE users SET disabled_at = CASE WHEN $2 THEN coalesce(disabled_at, now()) END
			WHERE name = $1 RETURNING `+columns, name, disabled))
		if err != nil {
			return err
		}
		return Notify(ctx, tx, u.ID)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return User{}, fmt.Errorf("disable/enable %q: %w", name, err)
	}
	return u, nil
}

// Delete removes an account with its tokens and sessions (ON DELETE
// CASCADE), notifying every api.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, "DELETE FROM users WHERE name = $1 RETURNING id", name).Scan(&id); err != nil {
			return err
		}
		return Notify(ctx, tx, id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("delete %q: %w", name, err)
	}
	return nil
}

// Notify tells every api, when tx commits, that userID's sign-ins changed,
// so each reloads that user's tokens (package tokens listens).
func Notify(ctx context.Context, tx pgx.Tx, userID string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, userID); err != nil {
		return fmt.Errorf("notify %s: %w", Channel, err)
	}
	return nil
}
