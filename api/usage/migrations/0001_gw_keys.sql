-- Each user's one gw key (Contract: Model usage; docs/usage.md), and the
-- keys of deleted users still to revoke at gw.
-- +goose Up
CREATE TABLE gw_keys (
    user_id uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    -- gw's id of the key (LiteLLM's token: the value's hash), for its
    -- update, rotation and deletion.
    token text NOT NULL UNIQUE,
    -- nonce || AES-256-GCM under the user's state key, HKDF label
    -- "cocoonbox gw key", additional data gw_keys|<user_id>|key.
    key_sealed bytea NOT NULL,
    -- The daily budget last set at gw, in micro-dollars.
    cap_micros bigint NOT NULL CHECK (cap_micros >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A user's delete takes the gw_keys row with no api call on the way: the
-- trigger keeps the token, and every api revokes what is here at gw.
CREATE TABLE gw_revoke (
    token text PRIMARY KEY,
    left_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE FUNCTION gw_keys_keep_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gw_revoke (token) SELECT token FROM gw_keys WHERE user_id = OLD.id ON CONFLICT DO NOTHING;
    RETURN OLD;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER users_delete_revokes_gw_key BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION gw_keys_keep_token();

-- +goose Down
DROP TRIGGER users_delete_revokes_gw_key ON users;
DROP FUNCTION gw_keys_keep_token();
DROP TABLE gw_revoke;
DROP TABLE gw_keys;
