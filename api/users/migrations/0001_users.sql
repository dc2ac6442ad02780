-- Accounts. Contract: Browser sign-in and device tokens (the personal token);
-- the console's password sign-in (issue 10).
-- +goose Up
CREATE TABLE users (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,38}$'),
    -- argon2id in the PHC string format: $argon2id$v=19$m=...,t=...,p=...$salt$hash
    password_hash text NOT NULL,
    admin boolean NOT NULL DEFAULT false,
    disabled_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- The personal token (cb_ + 64 hex): only its SHA-256 is kept.
    token_sha256 bytea UNIQUE CHECK (length(token_sha256) = 32),
    token_created_at timestamptz,
    token_used_at timestamptz
);

-- +goose Down
DROP TABLE users;
