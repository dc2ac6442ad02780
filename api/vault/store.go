package vault

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/client"
	"github.com/cocoonbox/cocoonbox/api/seal"
)

// Errors of the store, beside ErrInvalid.
var (
	// ErrNotFound: the user has no key of that name.
	ErrNotFound = errors.New("no such key")
	// ErrExists: the user has a key of that name already.
	ErrExists = errors.New("a key of that name exists")
	// ErrWrongMasterKey: a user's state key does not unseal under this
	// api's master key (a replica given another one). Nothing is changed.
	ErrWrongMasterKey = errors.New("the user's state key does not unseal under this api's master key: every replica must be given the same master key")
)

// Actor says who changed a key, for vault_audit.
type Actor string

// The actors (Contract: Key vault).
const (
	ActorApp     Actor = "app"
	ActorConsole Actor = "console"
	ActorCLI     Actor = "cli"
)

// AuditRetention is how long vault_audit keeps a row.
const AuditRetention = 90 * 24 * time.Hour

// Key is a key as answered: everything but its value.
type Key struct {
	ID          string    `json:"-"`
	Name        string    `json:"name"`
	Hosts       []string  `json:"hosts"`
	How         string    `json:"how"`
	Placeholder string    `json:"placeholder"`
	Created     time.Time `json:"created"`
	// Rotated is zero until the first rotation.
	Rotated time.Time `json:"rotated,omitzero"`
}

// Store keeps the vault in the users database.
type Store struct {
	pool     *pgxpool.Pool
	master   *MasterKey
	onChange func(owner string)
}

// NewStore is the vault on pool, sealing under master. onChange (may be
// nil) is called after each committed change with the owner's id: the box
// service pushes the new set to the owner's machines.
func NewStore(pool *pgxpool.Pool, master *MasterKey, onChange func(owner string)) *Store {
	return &Store{pool: pool, master: master, onChange: onChange}
}

func (s *Store) changed(owner string) {
	if s.onChange != nil {
		s.onChange(owner)
	}
}

// stateKey is owner's state key, made and sealed on first use. It locks
// the user row for tx. A sealed key that does not open is
// ErrWrongMasterKey, and it is never replaced.
func (s *Store) stateKey(ctx context.Context, tx pgx.Tx, owner string, create bool) ([]byte, error) {
	var sealed []byte
	err := tx.QueryRow(ctx, "SELECT state_key_sealed FROM users WHERE id = $1 FOR UPDATE", owner).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("no user %s", owner)
	}
	if err != nil {
		return nil, err
	}
	if sealed != nil {
		key, err := seal.Open(s.master.key, stateKeyLabel, stateKeyAAD(owner), sealed)
		if err != nil {
			return nil, fmt.Errorf("user %s (%s): %w", owner, s.master, ErrWrongMasterKey)
		}
		return key, nil
	}
	if !create {
		return nil, nil
	}
	key := make([]byte, stateKeySize)
	rand.Read(key)
	if _, err := tx.Exec(ctx, "UPDATE users SET state_key_sealed = $2 WHERE id = $1 AND state_key_sealed IS NULL",
		owner, seal.Seal(s.master.key, stateKeyLabel, stateKeyAAD(owner), key)); err != nil {
		return nil, err
	}
	return key, nil
}

// StateKey is owner's state key (32 bytes), made and sealed under the
// master key on first use: the secret every object of the user's is
// sealed under, each kind with its own HKDF label (Contract: Key vault,
// State objects (agent ↔ api)). A user that does not exist is an error,
// and a sealed key that does not open is ErrWrongMasterKey.
func (s *Store) StateKey(ctx context.Context, owner string) ([]byte, error) {
	var key []byte
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		key, err = s.stateKey(ctx, tx, owner, true)
		return err
	})
	return key, err
}

func audit(ctx context.Context, tx pgx.Tx, owner, id, name, action string, actor Actor) error {
	_, err := tx.Exec(ctx, "INSERT INTO vault_audit (owner, secret_id, name, action, actor) VALUES ($1, $2, $3, $4, $5)",
		owner, id, name, action, string(actor))
	return err
}

// Add stores a new key of owner's: name, how it is sent, its value. Bad
// input is an *InputError; a name taken is ErrExists. Nothing is stored
// on an error.
func (s *Store) Add(ctx context.Context, owner string, actor Actor, name string, spec Spec, value Secret) (Key, error) {
	if err := client.CheckKeyName(name); err != nil {
		return Key{}, err
	}
	hosts, how, err := spec.How()
	if err != nil {
		return Key{}, err
	}
	if err := client.CheckKeyValue(value.v); err != nil {
		return Key{}, err
	}
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	k := Key{ID: id, Name: name, Hosts: hosts, How: how, Placeholder: Placeholder(VendorPrefix(value.v), id)}
	if err := checkRecord(name, k.Placeholder, hosts, how); err != nil {
		return Key{}, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sk, err := s.stateKey(ctx, tx, owner, true)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `INSERT INTO vault_secrets (id, owner, name, hosts, how, placeholder, value_sealed)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
			id, owner, name, hosts, how, k.Placeholder, seal.Seal(sk, valueLabel, valueAAD(id, owner), []byte(value.v))).Scan(&k.Created)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return fmt.Errorf("%s: %w (keys rotate %s changes its value)", name, ErrExists, name)
		}
		if err != nil {
			return err
		}
		return audit(ctx, tx, owner, id, name, "create", actor)
	})
	if err != nil {
		return Key{}, err
	}
	s.changed(owner)
	return k, nil
}

const keyColumns = "id, name, hosts, how, placeholder, created_at, rotated_at"

func scanKey(row pgx.Row, extra ...any) (Key, error) {
	var k Key
	var rotated *time.Time
	err := row.Scan(append([]any{&k.ID, &k.Name, &k.Hosts, &k.How, &k.Placeholder, &k.Created, &rotated}, extra...)...)
	if rotated != nil {
		k.Rotated = *rotated
	}
	return k, err
}

// List answers owner's keys by name, without values.
func (s *Store) List(ctx context.Context, owner string) ([]Key, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+keyColumns+" FROM vault_secrets WHERE owner = $1 ORDER BY name", owner)
	if err != nil {
		return nil, err
	}
	keys := []Key{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// Rotate replaces the value of owner's key name; its placeholder stays.
func (s *Store) Rotate(ctx context.Context, owner string, actor Actor, name string, value Secret) (Key, error) {
	if err := client.CheckKeyName(name); err != nil {
		return Key{}, err
	}
	if err := client.CheckKeyValue(value.v); err != nil {
		return Key{}, err
	}
	var k Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sk, err := s.stateKey(ctx, tx, owner, false)
		if err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRow(ctx, "SELECT "+keyColumns+" FROM vault_secrets WHERE owner = $1 AND name = $2 FOR UPDATE", owner, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if sk == nil {
			return fmt.Errorf("user %s has keys but no state key", owner)
		}
		err = tx.QueryRow(ctx, "UPDATE vault_secrets SET value_sealed = $2, rotated_at = now() WHERE id = $1 RETURNING rotated_at",
			k.ID, seal.Seal(sk, valueLabel, valueAAD(k.ID, owner), []byte(value.v))).Scan(&k.Rotated)
		if err != nil {
			return err
		}
		return audit(ctx, tx, owner, k.ID, name, "rotate", actor)
	})
	if err != nil {
		return Key{}, err
	}
	s.changed(owner)
	return k, nil
}

// Delete removes owner's key name.
func (s *Store) Delete(ctx context.Context, owner string, actor Actor, name string) error {
	if err := client.CheckKeyName(name); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, "DELETE FROM vault_secrets WHERE owner = $1 AND name = $2 RETURNING id", owner, name).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		if err != nil {
			return err
		}
		return audit(ctx, tx, owner, id, name, "delete", actor)
	})
	if err != nil {
		return err
	}
	s.changed(owner)
	return nil
}

// Unsealed is a key with its value, for a box's claim env.
type Unsealed struct {
	Key
	// Value is the value as sent: the template applied for a header.
	Value Secret
}

// Unseal answers owner's keys with their rendered values, by name. A state
// key or value that does not unseal is an error naming the key: a box
// gets the whole set or nothing.
func (s *Store) Unseal(ctx context.Context, owner string) ([]Unsealed, error) {
	var out []Unsealed
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+keyColumns+", value_sealed FROM vault_secrets WHERE owner = $1 ORDER BY name", owner)
		if err != nil {
			return err
		}
		type sealedKey struct {
			Key
			sealed []byte
		}
		var ks []sealedKey
		for rows.Next() {
			var sk sealedKey
			if sk.Key, err = scanKey(rows, &sk.sealed); err != nil {
				rows.Close()
				return err
			}
			ks = append(ks, sk)
		}
		if err := rows.Err(); err != nil || len(ks) == 0 {
			return err
		}
		var stateKey []byte
		var sealed []byte
		if err := tx.QueryRow(ctx, "SELECT state_key_sealed FROM users WHERE id = $1", owner).Scan(&sealed); err != nil {
			return err
		}
		if stateKey, err = seal.Open(s.master.key, stateKeyLabel, stateKeyAAD(owner), sealed); err != nil {
			return fmt.Errorf("user %s (%s): %w", owner, s.master, ErrWrongMasterKey)
		}
		for _, k := range ks {
			v, err := seal.Open(stateKey, valueLabel, valueAAD(k.ID, owner), k.sealed)
			if err != nil {
				return fmt.Errorf("key %s of user %s %w", k.Name, owner, err)
			}
			out = append(out, Unsealed{Key: k.Key, Value: Secret{id: k.ID, v: render(k.How, string(v))}})
		}
		return nil
	})
	return out, err
}

// Sweep deletes the audit rows older than AuditRetention, answering how many.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM vault_audit WHERE at < now() - $1::interval", fmt.Sprintf("%d seconds", int64(AuditRetention/time.Second)))
	return tag.RowsAffected(), err
}

// RunSweeper sweeps now and every interval until ctx ends, logging errors
// through logf.
func (s *Store) RunSweeper(ctx context.Context, every time.Duration, logf func(err error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			logf(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
