-- Connect's grants and per-tool policies. Contract: Connect (design §16),
-- Storage (docs/connect.md). Both go with the user row.
-- +goose Up
CREATE TABLE connect_grants (
    -- 32 hex digits, random at connect; part of the sealed secret's
    -- additional data connect_grants|<id>|<user>|<connector>.
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The connector id: a catalog id, or a custom server's name.
    connector text NOT NULL CHECK (connector ~ '^[a-z][a-z0-9-]{0,23}$'),
    kind text NOT NULL CHECK (kind IN ('custom')),
    -- A custom server's streamable HTTP endpoint (https) and the header its
    -- key goes in ('' without a key).
    url text NOT NULL,
    header text NOT NULL,
    -- nonce (12 bytes) || AES-256-GCM of the grant's secrets as JSON, under
    -- HKDF-SHA256(user state key, "cocoonbox connect grant").
    secret_sealed bytea NOT NULL,
    -- The upstream's tools as it listed them (name, description,
    -- inputSchema), refreshed by a check.
    tools jsonb NOT NULL,
    needs_reconnect boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, connector)
);

CREATE TABLE connect_policies (
    user_id uuid NOT NULL,
    connector text NOT NULL,
    tool text NOT NULL,
    -- default is the absence of a row.
    policy text NOT NULL CHECK (policy IN ('allow', 'ask', 'off')),
    PRIMARY KEY (user_id, connector, tool),
    FOREIGN KEY (user_id, connector) REFERENCES connect_grants (user_id, connector) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE connect_policies;
DROP TABLE connect_grants;
