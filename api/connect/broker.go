package connect

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/singleflight"

	"github.com/cocoonbox/cocoonbox/api/seal"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// Broker holds the users' grants and calls their servers. Safe for
// concurrent use; Close it once.
type Broker struct {
	pool  *pgxpool.Pool
	vault *vault.Store
	up    *upstream
	// pending are the calls of ask tools waiting on this api for the
	// user's answer, given on any api (Follow).
	pending approvals
	// open are the door calls open on this api, ended by a disconnect or
	// sign out everywhere on any api (Follow).
	open openCalls
	// flights are the refreshes under way in this api, one per grant.
	flights singleflight.Group
	now     func() time.Time
}

// New is the broker on pool, sealing with the users' state keys (the
// vault's, package seal's scheme). It
// fails when the outbound dialer cannot follow the host's addresses.
func New(pool *pgxpool.Pool, v *vault.Store, cfg UpstreamConfig) (*Broker, error) {
	up, err := newUpstream(cfg)
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Broker{pool: pool, vault: v, up: up, now: now}, nil
}

// Close stops the outbound dialer.
func (b *Broker) Close() { b.up.close() }

// Tool is a connected tool as answered (no schema).
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Policy      Policy `json:"policy"`
}

// Connector is one of a user's grants, without its secrets.
type Connector struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	URL    string `json:"url"`
	Header string `json:"header,omitempty"`
	// Auth is key (the user's key in Header) or oauth (a token from the
	// server's authorization server, found by MCP discovery).
	Auth           string    `json:"auth"`
	Tools          []Tool    `json:"tools"`
	NeedsReconnect bool      `json:"needs_reconnect"`
	Connected      time.Time `json:"connected"`

	grantID string
	schemas []*sdk.Tool
}

// secrets is what a grant seals: a key, or an OAuth grant.
type secrets struct {
	Key   string       `json:"key,omitempty"`
	OAuth *oauthSecret `json:"oauth,omitempty"`
}

// ConnectCustom lists c's tools with its key and stores the grant (Contract:
// Connect, Console flow step 2). Bad input is an *InputError, a taken name
// ErrExists, a server that does not answer MCP with the key ErrUpstream;
// nothing is stored on an error.
func (b *Broker) ConnectCustom(ctx context.Context, user string, c Custom) (Connector, error) {
	if err := c.check(); err != nil {
		return Connector{}, err
	}
	tools, _, err := b.up.listTools(ctx, c)
	if err != nil {
		return Connector{}, err
	}
	if err := b.store(ctx, user, c, "key", secrets{Key: c.Key}, tools); err != nil {
		return Connector{}, err
	}
	return b.Get(ctx, user, c.Name)
}

// store seals s and inserts the grant of c with its tools; a taken name
// is ErrExists.
func (b *Broker) store(ctx context.Context, user string, c Custom, auth string, s secrets, tools []*sdk.Tool) error {
	toolsJSON, err := json.Marshal(tools)
	if err != nil {
		return err
	}
	plain, _ := json.Marshal(s)
	var raw [16]byte
	rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	sk, err := b.vault.StateKey(ctx, user)
	if err != nil {
		return err
	}
	sealed := seal.Seal(sk, grantLabel, grantAAD(id, user, c.Name), plain)
	_, err = b.pool.Exec(ctx, `INSERT INTO connect_grants (id, user_id, connector, kind, url, header, auth, secret_sealed, tools)
		VALUES ($1, $2, $3, 'custom', $4, $5, $6, $7, $8)`, id, user, c.Name, c.URL, c.Header, auth, sealed, toolsJSON)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%s: %w (disconnect it first)", c.Name, ErrExists)
	}
	return err
}

// List answers the user's connectors with their tools and policies.
func (b *Broker) List(ctx context.Context, user string) ([]Connector, error) {
	return b.query(ctx, user, "")
}

// Get answers one connector, or ErrNotFound.
func (b *Broker) Get(ctx context.Context, user, id string) (Connector, error) {
	cs, err := b.query(ctx, user, id)
	if err != nil {
		return Connector{}, err
	}
	if len(cs) == 0 {
		return Connector{}, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return cs[0], nil
}

func (b *Broker) query(ctx context.Context, user, only string) ([]Connector, error) {
	rows, err := b.pool.Query(ctx, `SELECT g.id, g.connector, g.kind, g.url, g.header, g.auth, g.tools, g.needs_reconnect, g.created_at,
			coalesce((SELECT jsonb_object_agg(p.tool, p.policy) FROM connect_policies p
				WHERE p.user_id = g.user_id AND p.connector = g.connector), '{}')
		FROM connect_grants g WHERE g.user_id = $1 AND ($2 = '' OR g.connector = $2) ORDER BY g.connector`, user, only)
	if err != nil {
		return nil, err
	}
	out := []Connector{}
	for rows.Next() {
		var c Connector
		var policies map[string]Policy
		if err := rows.Scan(&c.grantID, &c.ID, &c.Kind, &c.URL, &c.Header, &c.Auth, &c.schemas, &c.NeedsReconnect, &c.Connected, &policies); err != nil {
			rows.Close()
			return nil, err
		}
		c.Tools = []Tool{}
		for _, t := range c.schemas {
			p := policies[t.Name]
			if p == "" {
				p = PolicyDefault
			}
			c.Tools = append(c.Tools, Tool{Name: t.Name, Description: t.Description, Policy: p})
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// SetPolicy sets one tool's policy (default deletes the row). An unknown
// connector is ErrNotFound, a tool it does not list an *InputError.
func (b *Broker) SetPolicy(ctx context.Context, user, connector, tool string, p Policy) error {
	c, err := b.Get(ctx, user, connector)
	if err != nil {
		return err
	}
	known := false
	for _, t := range c.Tools {
		known = known || t.Name == tool
	}
	if !known {
		return &InputError{"tool", fmt.Sprintf("%q is not a tool of %s", tool, connector)}
	}
	if p == PolicyDefault {
		_, err = b.pool.Exec(ctx, "DELETE FROM connect_policies WHERE user_id = $1 AND connector = $2 AND tool = $3", user, connector, tool)
		return err
	}
	_, err = b.pool.Exec(ctx, `INSERT INTO connect_policies (user_id, connector, tool, policy) VALUES ($1, $2, $3, $4)
		ON CONFLICT (user_id, connector, tool) DO UPDATE SET policy = excluded.policy`, user, connector, tool, string(p))
	return err
}

// Disconnect deletes a grant with its secrets and policies, writes its
// audit row (door DoorConsole or DoorApp, which is also the caller) and
// ends every door call open on it, on this api at once and on every api
// through Channel when the delete commits (ErrDisconnected); false when
// there was none.
func (b *Broker) Disconnect(ctx context.Context, user, connector, door string) (bool, error) {
	var grant string
	err := b.pool.QueryRow(ctx, `WITH g AS (DELETE FROM connect_grants WHERE user_id = $1 AND connector = $2 RETURNING id)
		SELECT id, pg_notify($3, 'grant:' || id) FROM g`, user, connector, Channel).Scan(&grant, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	b.open.end(func(c *openCall) bool { return c.grant == grant }, ErrDisconnected)
	return true, b.audit(ctx, user, Activity{Connector: connector, Door: door, Caller: door, Decision: AuditDisconnect, Outcome: OutcomeOK})
}

// Check lists the server's tools again with the grant, stores them and
// answers what the server says it is. A server refusing the key sets
// needs_reconnect; a later good check clears it.
func (b *Broker) Check(ctx context.Context, user, connector string) (string, Connector, error) {
	c, err := b.Get(ctx, user, connector)
	if err != nil {
		return "", Connector{}, err
	}
	var tools []*sdk.Tool
	var account string
	err = b.use(ctx, user, c, func(cu Custom) (err error) {
		tools, account, err = b.up.listTools(ctx, cu)
		return err
	})
	if err != nil {
		b.needsReconnect(ctx, c)
		return "", Connector{}, err
	}
	toolsJSON, err := json.Marshal(tools)
	if err != nil {
		return "", Connector{}, err
	}
	if _, err := b.pool.Exec(ctx, "UPDATE connect_grants SET tools = $2, needs_reconnect = false WHERE id = $1", c.grantID, toolsJSON); err != nil {
		return "", Connector{}, err
	}
	c, err = b.Get(ctx, user, connector)
	return account, c, err
}

// custom is c's server with its credential unsealed, for a call, and
// the grant's secrets.
func (b *Broker) custom(ctx context.Context, user string, c Connector) (Custom, secrets, error) {
	var sealed []byte
	if err := b.pool.QueryRow(ctx, "SELECT secret_sealed FROM connect_grants WHERE id = $1 AND user_id = $2", c.grantID, user).Scan(&sealed); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Custom{}, secrets{}, fmt.Errorf("%s: %w", c.ID, ErrNotFound)
		}
		return Custom{}, secrets{}, err
	}
	s, err := b.unseal(ctx, user, c, sealed)
	if err != nil {
		return Custom{}, secrets{}, err
	}
	if s.OAuth != nil {
		return bearer(c, s.OAuth), s, nil
	}
	return Custom{Name: c.ID, URL: c.URL, Header: c.Header, Key: s.Key}, s, nil
}

// unseal opens c's secrets.
func (b *Broker) unseal(ctx context.Context, user string, c Connector, sealed []byte) (secrets, error) {
	sk, err := b.vault.StateKey(ctx, user)
	if err != nil {
		return secrets{}, err
	}
	plain, err := seal.Open(sk, grantLabel, grantAAD(c.grantID, user, c.ID), sealed)
	if err != nil {
		return secrets{}, fmt.Errorf("%s: the grant's secrets: %w", c.ID, err)
	}
	var s secrets
	if err := json.Unmarshal(plain, &s); err != nil {
		return secrets{}, fmt.Errorf("%s: the grant's secrets: %w", c.ID, err)
	}
	return s, nil
}
