-- Device tokens. Contract: Browser sign-in and device tokens ("users
-- migration 0009: id dev_ + 16 hex, user, sha256, client, label, created and
-- last-used times"). Versions 0002-0008 are left to the contract's other
-- users migrations.
-- +goose Up
CREATE TABLE user_tokens (
    id text PRIMARY KEY CHECK (id ~ '^dev_[0-9a-f]{16}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sha256 bytea NOT NULL UNIQUE CHECK (length(sha256) = 32),
    client text NOT NULL,
    label text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    used_at timestamptz
);
CREATE INDEX user_tokens_user_id ON user_tokens (user_id);

-- +goose Down
DROP TABLE user_tokens;
