package oauth

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cocoonbox/cocoonbox/api/database"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema is the package's migrations (oauth_clients; oauth_key,
// oauth_codes, oauth_grants, oauth_tokens, oauth_boxes), tracked in
// oauth_schema_migrations. It comes after users.Schema and boxes.Schema.
var Schema = database.NewSchema("oauth_schema_migrations", migrations, "migrations")

// ErrUnknownClient is a client_id that is neither a stored registration
// nor a metadata document's URL: RFC 6749 §5.2's invalid_client.
var ErrUnknownClient = errors.New("invalid_client: no such client")

// Clients finds a client by its client_id: a metadata document's by its
// Fetcher, a registered one in the database.
type Clients struct {
	pool  *pgxpool.Pool
	fetch *Fetcher
}

// NewClients is the clients of pool (migrated with Schema), documents
// fetched by fetch.
func NewClients(pool *pgxpool.Pool, fetch *Fetcher) *Clients {
	return &Clients{pool: pool, fetch: fetch}
}

// Lookup is the client whose client_id is id. A document's errors are the
// Fetcher's; an id no registration holds is ErrUnknownClient.
func (c *Clients) Lookup(ctx context.Context, id string) (Client, error) {
	if IsDocumentURL(id) {
		return c.fetch.Fetch(ctx, id)
	}
	cl := Client{ID: id}
	err := c.pool.QueryRow(ctx, `SELECT name, redirect_uris, grant_types FROM oauth_clients WHERE id = $1`, id).
		Scan(&cl.Name, &cl.RedirectURIs, &cl.GrantTypes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Client{}, fmt.Errorf("%w: %q", ErrUnknownClient, id)
	}
	if err != nil {
		return Client{}, fmt.Errorf("look up client %q: %w", id, err)
	}
	return cl, nil
}

// register stores a client of m under a new random id.
func (c *Clients) register(ctx context.Context, m metadata) (Client, error) {
	b := make([]byte, 16)
	rand.Read(b)
	cl := Client{ID: hex.EncodeToString(b), Name: m.ClientName, RedirectURIs: m.RedirectURIs, GrantTypes: m.GrantTypes}
	if _, err := c.pool.Exec(ctx, `INSERT INTO oauth_clients (id, name, redirect_uris, grant_types) VALUES ($1, $2, $3, $4)`,
		cl.ID, cl.Name, cl.RedirectURIs, cl.GrantTypes); err != nil {
		return Client{}, fmt.Errorf("store client: %w", err)
	}
	return cl, nil
}
