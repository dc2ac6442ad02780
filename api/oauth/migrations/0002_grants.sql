-- OAuth for agents: the key of the digests, the authorization codes, the
-- grants a user approved, their tokens, and which grant created which
-- box. Contract: OAuth for agents (Storage); docs/oauth.md, Grants and
-- tokens. Tracked in oauth_schema_migrations, after users and boxes.
-- +goose Up

-- One row: the HMAC-SHA256 key of every stored digest of a code or a
-- token, 32 bytes of crypto/rand the first api to start puts here (every
-- other replica reads it), so no code or token is ever stored and a
-- digest means nothing to another deployment.
CREATE TABLE oauth_key (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    key bytea NOT NULL CHECK (length(key) = 32)
);

-- A grant: what the user approved on the consent page, made when its
-- code is exchanged. Its refresh tokens are one family: a replayed one
-- revokes the grant (revoked_at), which ends every token of it.
CREATE TABLE oauth_grants (
    id text PRIMARY KEY CHECK (id ~ '^cbg_[0-9a-f]{24}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id text NOT NULL,
    client_name text NOT NULL,
    -- The host of the client's metadata document; '' for a registered
    -- client (shown as unverified).
    verified_host text NOT NULL,
    redirect_uri text NOT NULL,
    max_boxes integer NOT NULL CHECK (max_boxes BETWEEN 1 AND 16),
    max_running integer NOT NULL CHECK (max_running BETWEEN 1 AND max_boxes),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    -- The last use of one of its tokens, kept to the minute.
    last_used_at timestamptz,
    revoked_at timestamptz,
    -- When the user saw it on the Agents page; NULL marks it new.
    seen_at timestamptz
);
CREATE INDEX oauth_grants_user_id ON oauth_grants (user_id);

-- An authorization code (one use, 60 s): what approve stored, the grant
-- it became once exchanged (so a second use revokes that grant, OAuth
-- 2.1 §4.1.3).
CREATE TABLE oauth_codes (
    digest bytea PRIMARY KEY CHECK (length(digest) = 32),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    client_id text NOT NULL,
    client_name text NOT NULL,
    verified_host text NOT NULL,
    redirect_uri text NOT NULL,
    -- PKCE S256: base64url of the SHA-256 of the verifier, 43 characters.
    code_challenge text NOT NULL CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$'),
    -- The resource the request named ('' for none: the whole resource).
    resource text NOT NULL,
    max_boxes integer NOT NULL CHECK (max_boxes BETWEEN 1 AND 16),
    max_running integer NOT NULL CHECK (max_running BETWEEN 1 AND max_boxes),
    days integer NOT NULL CHECK (days IN (1, 7, 30, 90)),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    grant_id text REFERENCES oauth_grants (id) ON DELETE CASCADE
);
CREATE INDEX oauth_codes_expires_at ON oauth_codes (expires_at);

-- A grant's tokens: short-lived access tokens (cba_) and one-use refresh
-- tokens (cbr_), by the HMAC of the token under oauth_key. A refresh token
-- once used keeps its row (used_at) while its grant lives, so its replay
-- is known.
CREATE TABLE oauth_tokens (
    digest bytea PRIMARY KEY CHECK (length(digest) = 32),
    grant_id text NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('access', 'refresh')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);
CREATE INDEX oauth_tokens_grant_id ON oauth_tokens (grant_id);

-- Which grant created which box; it goes with the box row or the grant.
CREATE TABLE oauth_boxes (
    box_id text PRIMARY KEY REFERENCES boxes (id) ON DELETE CASCADE,
    grant_id text NOT NULL REFERENCES oauth_grants (id) ON DELETE CASCADE
);
CREATE INDEX oauth_boxes_grant_id ON oauth_boxes (grant_id);

-- +goose Down
DROP TABLE oauth_boxes;
DROP TABLE oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_key;
