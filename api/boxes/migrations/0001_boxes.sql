-- Boxes, their operations and their event log. Contract: Boxes (api) ↔
-- sandboxd; Control MCP (states and phases); Box identity. Tracked in
-- boxes_schema_migrations, after users (its rows go with the user's).
-- +goose Up

-- A user's own limits: how many boxes they may hold, and how many of those
-- may be starting, running or hibernating at once.
ALTER TABLE users
    ADD COLUMN max_boxes integer NOT NULL DEFAULT 1 CHECK (max_boxes BETWEEN 0 AND 64),
    ADD COLUMN max_running integer NOT NULL DEFAULT 1 CHECK (max_running BETWEEN 0 AND 64);

CREATE TABLE boxes (
    id text PRIMARY KEY CHECK (id ~ '^cb-[0-9a-f]{16}$'),
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- The hostname rule of Box identity, lower case (see boxes.CheckName).
    name text NOT NULL CHECK (name ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$'),
    image text NOT NULL,
    state text NOT NULL CHECK (state IN ('starting', 'running', 'hibernating', 'hibernated', 'failed')),
    -- The supervisor holding the machine (a key of sandbox.hosts, or local).
    host text NOT NULL,
    -- Boots so far (1 after create); a wake keeps it.
    incarnation bigint NOT NULL DEFAULT 0,
    -- The box's ed25519 identity key (the 32-byte seed); its public half
    -- goes into the identity record at every boot and wake.
    identity_seed bytea NOT NULL CHECK (length(identity_seed) = 32),
    -- What the api wrote last: the wake id and /etc/machine-id.
    wake_id text NOT NULL DEFAULT '',
    machine_id text NOT NULL DEFAULT '',
    save_id text,
    save_size bigint,
    saved_at timestamptz,
    -- The operation under way, if any.
    operation_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, name)
);

-- The newest save of a deleted box, kept for Create with restore.
CREATE TABLE box_saves (
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL,
    save_id text NOT NULL,
    host text NOT NULL,
    image text NOT NULL,
    size bigint NOT NULL,
    saved_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, name)
);

-- No foreign key to boxes: an operation's record outlives a deleted box.
CREATE TABLE box_operations (
    id text PRIMARY KEY CHECK (id ~ '^op-[0-9a-f]{16}$'),
    box_id text NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('create', 'ensure', 'hibernate', 'save', 'upgrade', 'delete')),
    phase text NOT NULL,
    error text NOT NULL DEFAULT '',
    request_id text NOT NULL,
    -- The api instance running it; recovery adopts an operation whose
    -- runner no longer holds its instance lock.
    runner text NOT NULL,
    -- What the operation works towards: the image of a create or upgrade,
    -- the save a create restores.
    image text NOT NULL DEFAULT '',
    restore_save text NOT NULL DEFAULT '',
    total_bytes bigint NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    UNIQUE (user_id, request_id)
);
-- Two operations on one box never run at once, whichever api began them.
CREATE UNIQUE INDEX box_operations_one_under_way ON box_operations (box_id) WHERE ended_at IS NULL;

-- The event log: seq is given under a transaction lock (boxes.eventLock), so
-- it grows in commit order and a reader's cursor never skips a late commit.
CREATE TABLE box_events (
    seq bigint PRIMARY KEY,
    box_id text NOT NULL,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    -- One of: a state, or an operation's step (the Operation, protobuf).
    state text,
    operation_id text,
    operation bytea,
    CHECK ((state IS NULL) <> (operation IS NULL))
);
CREATE INDEX box_events_user ON box_events (user_id, seq);
CREATE INDEX box_events_operation ON box_events (operation_id, seq);

-- +goose Down
DROP TABLE box_events;
DROP TABLE box_operations;
DROP TABLE box_saves;
DROP TABLE boxes;
ALTER TABLE users DROP COLUMN max_boxes, DROP COLUMN max_running;
