-- OAuth for agents: the clients that registered (RFC 7591). A client
-- whose client_id is a metadata document's URL is never stored: the api
-- fetches and caches its document. Contract: OAuth for agents; see
-- docs/oauth.md, Clients.
-- +goose Up
CREATE TABLE oauth_clients (
    -- 32 hex digits, random at registration; never a URL, so it never
    -- collides with a metadata document's client_id.
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    name text NOT NULL,
    redirect_uris text[] NOT NULL CHECK (cardinality(redirect_uris) > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE oauth_clients;
