-- Connect's audit: one row per door call and per disconnect, kept 90
-- days (Contract: Connect (design §16), Audit; docs/connect.md). Never
-- arguments, results or tokens. A row goes with the user row.
-- +goose Up
CREATE TABLE connect_audit (
    id bigserial PRIMARY KEY,
    -- By the api's clock (apiserver.Options.Now), which the sweep reads too.
    at timestamptz NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    connector text NOT NULL,
    -- The connector's own tool name; '' for a disconnect.
    tool text NOT NULL,
    -- mcp (the mode B door), box (the box door), or where a disconnect
    -- came from: console or app (Connectors over gRPC).
    door text NOT NULL CHECK (door IN ('mcp', 'box', 'console', 'app')),
    -- mcp:<clientInfo.name>, box:<machine>, or the door for a disconnect.
    caller text NOT NULL,
    decision text NOT NULL CHECK (decision IN ('allow', 'approved', 'denied', 'off', 'approval_required', 'needs_reconnect', 'disconnect')),
    outcome text NOT NULL CHECK (outcome IN ('ok', 'error', 'outcome_unknown')),
    -- The HTTP status of the server's last answer to the call; NULL when
    -- the call never reached it.
    upstream_status integer,
    latency_ms bigint NOT NULL,
    -- The arguments' JSON as the door got it, and the result's as it
    -- answered.
    request_bytes bigint NOT NULL,
    response_bytes bigint NOT NULL,
    -- HMAC-SHA256 of the arguments' JSON under HKDF-SHA256(user state key,
    -- "cocoonbox connect audit"): equal arguments compare equal, a guess
    -- cannot be checked without the key. NULL for a disconnect.
    arguments_hmac bytea CHECK (length(arguments_hmac) = 32)
);
CREATE INDEX connect_audit_user ON connect_audit (user_id, at DESC);
CREATE INDEX connect_audit_at ON connect_audit (at);

-- +goose Down
DROP TABLE connect_audit;
