-- The users whose objects the state store still holds after their row
-- went (cocoonbox-api users delete takes the row with no api call on the
-- way): every api's sweeper removes <uid>/ from the store and then the
-- row (state.Sweeper). Contract: Flow library ("Removing <uid>/ removes
-- the library"); issue 42, "a user deleted: <uid>/ is gone from the store".
-- +goose Up
CREATE TABLE state_deleted_users (
    user_id uuid PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE FUNCTION state_keep_deleted_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO state_deleted_users (user_id) VALUES (OLD.id) ON CONFLICT DO NOTHING;
    RETURN OLD;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER users_delete_keeps_state_deleted_user BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION state_keep_deleted_user();

-- +goose Down
DROP TRIGGER users_delete_keeps_state_deleted_user ON users;
DROP FUNCTION state_keep_deleted_user();
DROP TABLE state_deleted_users;
