-- Authorization codes of the first-party clients' browser sign-in.
-- Contract: Browser sign-in and device tokens ("stores a one-use code (60 s)").
-- Only the code's SHA-256 is kept. A code stays after its use, with the
-- device it made, so a second use is refused and revokes that device
-- (RFC 6749 §4.1.2); rows are removed an hour after they expired.
-- +goose Up
CREATE TABLE signin_codes (
    code_sha256 bytea PRIMARY KEY CHECK (length(code_sha256) = 32),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client text NOT NULL,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    device_name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    device_id text
);
CREATE INDEX signin_codes_expires_at ON signin_codes (expires_at);

-- +goose Down
DROP TABLE signin_codes;
