-- Idle hibernate's clock (Contract: OAuth for agents, "Idle hibernate",
-- "Idle user boxes"; api/boxes/idle.go): when a client call on the box
-- was last open, began or ended, as the apis write it, or when the box
-- last went running (each wake starts the clock again). Existing boxes
-- start it at the migration.
-- +goose Up
ALTER TABLE boxes ADD COLUMN active_at timestamptz NOT NULL DEFAULT now();

-- +goose Down
ALTER TABLE boxes DROP COLUMN active_at;
