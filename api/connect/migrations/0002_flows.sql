-- The console flow's pending sign-ins, and how a grant authenticates.
-- Contract: Connect (design §16), Console flow and Storage
-- (docs/connect.md). A flow goes with the user row.
-- +goose Up
CREATE TABLE connect_flows (
    -- Hex SHA-256 of the flow's random state: the state itself is only
    -- in the vendor's redirect. Part of the sealed secrets' additional
    -- data connect_flows|<id>|<user>|<connector>.
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{64}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    connector text NOT NULL CHECK (connector ~ '^[a-z][a-z0-9-]{0,23}$'),
    url text NOT NULL,
    -- SHA-256 of the console session secret (cb_session) that began the
    -- flow, and of the random nonce in the cb_connect cookie.
    session_sha256 bytea NOT NULL CHECK (length(session_sha256) = 32),
    nonce_sha256 bytea NOT NULL CHECK (length(nonce_sha256) = 32),
    -- The PKCE verifier, the registered client and the authorization
    -- server's endpoints and issuer, sealed as a grant's secrets are.
    secret_sealed bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX connect_flows_expires ON connect_flows (expires_at);

-- key: the user's key in header; oauth: a token from MCP discovery's
-- authorization server, sent as Authorization: Bearer.
ALTER TABLE connect_grants ADD COLUMN auth text NOT NULL DEFAULT 'key' CHECK (auth IN ('key', 'oauth'));

-- +goose Down
ALTER TABLE connect_grants DROP COLUMN auth;
DROP TABLE connect_flows;
