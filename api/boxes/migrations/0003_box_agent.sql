-- The agent mark (Contract: OAuth for agents, "Agent boxes and the user's
-- limits"): true for a box an OAuth grant created (boxes.WithAgent), set
-- by the box's insert before its machine starts and kept after the grant
-- ends. An agent box is outside the user's max_boxes and running limit,
-- gets none of its owner's credentials, and hibernates when idle
-- (docs/box-lifecycle.md).
-- +goose Up
ALTER TABLE boxes ADD COLUMN agent boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE boxes DROP COLUMN agent;
