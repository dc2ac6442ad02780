-- Scheduled wake (Contract: Scheduled wake, Idle user boxes; docs/wake.md):
-- a box's schedules, which go with the box (ON DELETE CASCADE).
-- +goose Up
CREATE TABLE box_schedules (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    box_id text NOT NULL REFERENCES boxes (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Exactly one: a one-time wake, or a cron expression (five fields).
    at timestamptz,
    cron text,
    -- The IANA time zone the cron expression is read in.
    time_zone text NOT NULL,
    -- How long after each wake idle hibernate leaves the box alone.
    keep_up_seconds bigint NOT NULL CHECK (keep_up_seconds >= 0),
    -- The next wake; NULL once a one-time wake is done.
    next_at timestamptz,
    -- The last wake's SleepAt: idle hibernate may take the box from then.
    sleep_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK ((at IS NULL) <> (cron IS NULL))
);
CREATE INDEX box_schedules_due ON box_schedules (next_at) WHERE next_at IS NOT NULL;
CREATE INDEX box_schedules_box ON box_schedules (box_id);

-- +goose Down
DROP TABLE box_schedules;
