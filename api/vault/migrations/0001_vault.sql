-- The key vault. Contract: Key vault (docs/key-vault.md). Both tables go
-- with the user row.
-- +goose Up
CREATE TABLE vault_secrets (
    -- 32 hex digits, random at add; the placeholder ends cbv_<id> and the
    -- host-only claim env entry is CBV_<id>.
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    owner uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$'),
    hosts text[] NOT NULL CHECK (cardinality(hosts) > 0),
    -- Decoded, as a guest/vault record's: "Authorization: Bearer {}" or "?key={}".
    how text NOT NULL,
    placeholder text NOT NULL,
    -- nonce (12 bytes) || AES-256-GCM ciphertext and tag, additional data
    -- vault_secrets|<id>|<owner>|value.
    value_sealed bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    rotated_at timestamptz,
    UNIQUE (owner, name)
);

CREATE TABLE vault_audit (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    secret_id text NOT NULL,
    name text NOT NULL,
    action text NOT NULL CHECK (action IN ('create', 'rotate', 'delete')),
    actor text NOT NULL CHECK (actor IN ('app', 'console', 'cli')),
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vault_audit_at ON vault_audit (at);
CREATE INDEX vault_audit_owner ON vault_audit (owner, at);

-- +goose Down
DROP TABLE vault_audit;
DROP TABLE vault_secrets;
