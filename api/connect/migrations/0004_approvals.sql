-- The pending approvals of ask tools' door calls, so that the console of
-- any api on the database lists and answers a call waiting on another
-- (Contract: Connect (design §16), Console calls; docs/connect.md,
-- Replicas). A row lives while its call waits: the api serving the call
-- inserts it and deletes it when the call ends; an answer sets decision
-- and NOTIFYs cocoonbox_connect. An approval goes with the user row.
-- +goose Up
CREATE TABLE connect_approvals (
    -- 32 hex digits, random.
    id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    connector text NOT NULL,
    tool text NOT NULL,
    door text NOT NULL,
    -- The database's clock, which the listing and the sweep read too: an
    -- approval older than connect.ApprovalTimeout is no longer waited on
    -- (its api went away without deleting it).
    created_at timestamptz NOT NULL DEFAULT now(),
    -- once, always or deny once answered; NULL while pending.
    decision text CHECK (decision IN ('once', 'always', 'deny'))
);
CREATE INDEX connect_approvals_user ON connect_approvals (user_id, created_at);

-- +goose Down
DROP TABLE connect_approvals;
