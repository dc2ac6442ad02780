-- A registered client's grant_types as it asked (RFC 7591 §2; issue 41):
-- one registered with authorization_code alone was stored as if it had
-- asked for refresh_token too. A code carries whether its client takes
-- refresh tokens, so the exchange answers one only then. The default is
-- what a registration without grant_types gets (docs/oauth.md, Clients).
-- +goose Up
ALTER TABLE oauth_clients ADD COLUMN grant_types text[] NOT NULL DEFAULT '{authorization_code,refresh_token}';
ALTER TABLE oauth_codes ADD COLUMN refresh boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE oauth_codes DROP COLUMN refresh;
ALTER TABLE oauth_clients DROP COLUMN grant_types;
