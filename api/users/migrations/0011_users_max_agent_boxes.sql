-- How many agent boxes (boxes an OAuth grant created, boxes.agent) all of
-- a user's grants may hold together; NULL for no cap, the admin-made
-- default (Contract: Sign-in with GitHub and signup, "Agent boxes of a
-- user", which names this users migration 0010: 0010 is the vault's state
-- key, so it is 0011). Checked under the owner's row lock when an agent
-- box is added (api/boxes).
-- +goose Up
ALTER TABLE users ADD COLUMN max_agent_boxes integer CHECK (max_agent_boxes IS NULL OR max_agent_boxes > 0);

-- +goose Down
ALTER TABLE users DROP COLUMN max_agent_boxes;
