-- The cb_queue cookie's secrets (issue 41, Deliver 9; docs/signup.md, "The
-- queue cookie"): cbq_ + 64 hex of crypto/rand, only the SHA-256 kept, one
-- a GitHub sign-in that queued (several browsers, several rows). The
-- cookie once held the entry's id, which becomes the account's id at
-- admission. spent_at is the admission: a spent secret answers the
-- entry's status alone.
-- +goose Up
CREATE TABLE signup_queue_cookies (
    sha256 bytea PRIMARY KEY CHECK (length(sha256) = 32),
    queue_id uuid NOT NULL REFERENCES signup_queue (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    spent_at timestamptz
);
CREATE INDEX signup_queue_cookies_queue_id ON signup_queue_cookies (queue_id);

-- +goose Down
DROP TABLE signup_queue_cookies;
