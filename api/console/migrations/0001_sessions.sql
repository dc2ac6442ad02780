-- Console sessions (the cb_session cookie): only the cookie's SHA-256 is kept.
-- +goose Up
CREATE TABLE console_sessions (
    sha256 bytea PRIMARY KEY CHECK (length(sha256) = 32),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_user_id ON console_sessions (user_id);

-- +goose Down
DROP TABLE console_sessions;
