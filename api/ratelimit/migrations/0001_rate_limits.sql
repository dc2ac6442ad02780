-- Rate limits shared by every api on the database (package ratelimit): one
-- row per scope and key, its theoretical arrival time (GCRA). A row whose
-- tat has passed is a full bucket, the same as no row, and is swept.
-- +goose Up
CREATE TABLE rate_limits (
    scope text NOT NULL,
    key text NOT NULL,
    tat timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX rate_limits_tat ON rate_limits (scope, tat);

-- +goose Down
DROP TABLE rate_limits;
