-- A user's vault state key (api/vault, docs/key-vault.md): 32 random bytes
-- sealed under the api's master key, made on the user's first use of the
-- vault; NULL until then. It goes with the user row.
-- +goose Up
ALTER TABLE users ADD COLUMN state_key_sealed bytea;

-- +goose Down
ALTER TABLE users DROP COLUMN state_key_sealed;
