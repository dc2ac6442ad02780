-- Sign-in with GitHub and signup (Contract: "Sign-in with GitHub and
-- signup"; docs/signup.md). In the users database, after users.Schema
-- (users 0012 adds users.idp and makes password_hash nullable).
-- +goose Up

-- A person's account at an identity provider, linked to one user. subject
-- is GitHub's numeric account id (a login can be renamed and reused; the
-- id cannot). One row per IdP account, and one account of each IdP per
-- user. Only a signed-in user connects one, or admission links it: an
-- email address never links an account (email is what the IdP said at the
-- last sign-in, for the admin's eyes).
CREATE TABLE identities (
    idp text NOT NULL CHECK (idp IN ('github')),
    subject text NOT NULL CHECK (subject ~ '^[1-9][0-9]{0,19}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- GitHub's login at the last sign-in, shown in the console only.
    login text NOT NULL DEFAULT '',
    email text NOT NULL DEFAULT '',
    email_verified boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (idp, subject),
    UNIQUE (user_id, idp)
);

-- Signup's settings: one row, locked by admission (FOR UPDATE) so a freed
-- seat admits one person across apis. Off and invite-only by default;
-- empty allow lists allow everyone.
CREATE TABLE signup_settings (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    enabled boolean NOT NULL DEFAULT false,
    invite_only boolean NOT NULL DEFAULT true,
    seats integer NOT NULL DEFAULT 0 CHECK (seats >= 0),
    allow_domains text[] NOT NULL DEFAULT '{}',
    allow_emails text[] NOT NULL DEFAULT '{}',
    -- A signup account's gw daily cap ($1) and agent-box cap.
    daily_cap_micros bigint NOT NULL DEFAULT 1000000 CHECK (daily_cap_micros > 0),
    max_agent_boxes integer NOT NULL DEFAULT 1 CHECK (max_agent_boxes > 0),
    -- The hourly brake: accounts admitted in any hour.
    hourly_accounts integer NOT NULL DEFAULT 50 CHECK (hourly_accounts > 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO signup_settings DEFAULT VALUES;

-- Invites: cbi_ + 64 hex, only the code's SHA-256 kept. Made by an admin
-- (created_by) or by an admin's invite-scoped token (token_id, signup 0002
-- adds its reference to invite_tokens).
CREATE TABLE invites (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    code_sha256 bytea NOT NULL UNIQUE CHECK (length(code_sha256) = 32),
    uses integer NOT NULL CHECK (uses BETWEEN 1 AND 1000),
    used integer NOT NULL DEFAULT 0 CHECK (used >= 0 AND used <= uses),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    created_by uuid REFERENCES users (id) ON DELETE SET NULL,
    token_id text
);

-- People waiting for a seat. id becomes the admitted account's id, so a
-- retried admission reuses the account a failed attempt made; user_id is
-- set (to id) once admitted, and the user's delete removes the entry.
-- front: an invite put the person at the front.
CREATE TABLE signup_queue (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    idp text NOT NULL CHECK (idp IN ('github')),
    subject text NOT NULL,
    login text NOT NULL,
    email text NOT NULL,
    email_verified boolean NOT NULL,
    invite uuid REFERENCES invites (id) ON DELETE SET NULL,
    status text NOT NULL DEFAULT 'waiting' CHECK (status IN ('waiting', 'rejected', 'admitted')),
    front boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    user_id uuid UNIQUE REFERENCES users (id) ON DELETE CASCADE CHECK (user_id IS NULL OR user_id = id),
    UNIQUE (idp, subject)
);
CREATE INDEX signup_queue_waiting ON signup_queue (front DESC, created_at) WHERE status = 'waiting';

-- The GitHub sign-ins under way (POST /cb/api/auth/github/begin to the
-- callback): the state's and the cb_login nonce's SHA-256, the PKCE
-- verifier, 10 minutes, one use (used_at). purpose connect carries the
-- signed-in user who connects an identity. Rows go an hour after they
-- expired.
CREATE TABLE github_login_flows (
    state_sha256 bytea PRIMARY KEY CHECK (length(state_sha256) = 32),
    nonce_sha256 bytea NOT NULL CHECK (length(nonce_sha256) = 32),
    verifier text NOT NULL,
    purpose text NOT NULL CHECK (purpose IN ('signin', 'connect')),
    user_id uuid REFERENCES users (id) ON DELETE CASCADE,
    return_to text NOT NULL,
    invite text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    CHECK ((purpose = 'connect') = (user_id IS NOT NULL))
);
CREATE INDEX github_login_flows_expires_at ON github_login_flows (expires_at);

-- +goose Down
DROP TABLE github_login_flows;
DROP TABLE signup_queue;
DROP TABLE invites;
DROP TABLE signup_settings;
DROP TABLE identities;
