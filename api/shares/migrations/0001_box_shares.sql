-- Shares of a box's screen (issue 43, Deliver 4; docs/screen.md, "Shares"):
-- a link whose secret the api keeps only as its SHA-256, and the audit log
-- of every viewer's open and close, which the owner reads.
-- +goose Up
CREATE TABLE box_shares (
    id text PRIMARY KEY CHECK (id ~ '^sh-[0-9a-f]{16}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- NULL once the box is deleted: the link stops working, the log stays.
    box_id text REFERENCES boxes (id) ON DELETE SET NULL,
    box_name text NOT NULL,
    -- SHA-256 of the secret (cbs_ and 64 hex); the secret itself is never stored.
    secret_hash bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
    view_only boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX box_shares_user ON box_shares (user_id, created_at DESC);

CREATE TABLE box_share_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    share_id text NOT NULL REFERENCES box_shares (id) ON DELETE CASCADE,
    -- One viewer's id, the same in its open and its close.
    viewer text NOT NULL,
    event text NOT NULL CHECK (event IN ('open', 'close')),
    at timestamptz NOT NULL DEFAULT now(),
    address text NOT NULL,
    reason text NOT NULL DEFAULT ''
);
CREATE INDEX box_share_events_share ON box_share_events (share_id, id DESC);

-- +goose Down
DROP TABLE box_share_events;
DROP TABLE box_shares;
