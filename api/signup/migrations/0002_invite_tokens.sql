-- Invite-scoped tokens (Contract: Sign-in with GitHub and signup, "Invite-scoped
-- tokens ... invite_tokens, signup migration 0002"): cbit_ + 64 hex, only the
-- SHA-256 kept; alive while its admin is an enabled admin (checked at each use).
-- Also what signup's admission and a signup account's caps need beside 0001:
-- the invites a token made, a log of admissions for the hourly brake (a user's
-- delete removes the queue entry, and must not give the hour's places back),
-- and the account's gw daily cap.
-- +goose Up
CREATE TABLE invite_tokens (
    id text PRIMARY KEY CHECK (id ~ '^ivt_[0-9a-f]{16}$'),
    sha256 bytea NOT NULL UNIQUE CHECK (length(sha256) = 32),
    admin_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label text NOT NULL CHECK (length(label) BETWEEN 1 AND 100),
    created_at timestamptz NOT NULL DEFAULT now(),
    used_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX invite_tokens_admin_id ON invite_tokens (admin_id);
ALTER TABLE invites ADD CONSTRAINT invites_token_id_fkey FOREIGN KEY (token_id) REFERENCES invite_tokens (id) ON DELETE SET NULL;
CREATE INDEX invites_token_id ON invites (token_id);

CREATE TABLE signup_admissions (
    user_id uuid NOT NULL,
    admitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signup_admissions_at ON signup_admissions (admitted_at);

-- A signup account's own gw daily cap, in micro-dollars (signup_settings'
-- daily_cap_micros when admitted); NULL is the default cap of admin-made
-- accounts. Nothing meters model usage yet (boxes.Handler.Usage is a stub).
ALTER TABLE users ADD COLUMN daily_cap_micros bigint CHECK (daily_cap_micros IS NULL OR daily_cap_micros >= 0);

-- +goose Down
ALTER TABLE users DROP COLUMN daily_cap_micros;
DROP TABLE signup_admissions;
DROP INDEX invites_token_id;
ALTER TABLE invites DROP CONSTRAINT invites_token_id_fkey;
DROP TABLE invite_tokens;
