-- What a deleted user's rows named on the supervisors: their machines and
-- saves. Deleting a user (cocoonbox-api users delete) takes their box rows
-- at once (ON DELETE CASCADE) with no api call on the way, so this trigger
-- keeps the names and every api's recovery removes them from their hosts
-- (boxes.Service.sweep), leaving no machine booted for a user who is gone.
-- +goose Up
CREATE TABLE box_leftovers (
    kind text NOT NULL CHECK (kind IN ('machine', 'save')),
    id text NOT NULL,
    host text NOT NULL,
    left_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, id)
);

-- +goose StatementBegin
CREATE FUNCTION boxes_keep_leftovers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO box_leftovers (kind, id, host)
        SELECT 'machine', id, host FROM boxes WHERE user_id = OLD.id
        UNION ALL
        SELECT 'save', save_id, host FROM boxes WHERE user_id = OLD.id AND save_id IS NOT NULL
        UNION ALL
        SELECT 'save', save_id, host FROM box_saves WHERE user_id = OLD.id
    ON CONFLICT DO NOTHING;
    RETURN OLD;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER users_delete_keeps_box_leftovers BEFORE DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION boxes_keep_leftovers();

-- +goose Down
DROP TRIGGER users_delete_keeps_box_leftovers ON users;
DROP FUNCTION boxes_keep_leftovers();
DROP TABLE box_leftovers;
