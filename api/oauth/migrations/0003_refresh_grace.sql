-- The refresh grace window (docs/oauth.md, Tokens; issue 41, Deliver 8):
-- a spent refresh token keeps, for RefreshGrace after its use, the pair
-- its refresh answered, sealed with a key only that refresh token's
-- holder can make (AES-256-GCM; see successorKey), so a replay by the
-- same client within the window answers that pair again. prune clears it
-- after the window.
-- +goose Up
ALTER TABLE oauth_tokens ADD COLUMN successor bytea;

-- +goose Down
ALTER TABLE oauth_tokens DROP COLUMN successor;
