-- Accounts made through an identity provider (api/signup; Contract: Sign-in
-- with GitHub and signup). idp is NULL for an admin-made account and
-- 'github' for one signup admitted; such an account has no password
-- (password_hash NULL), and the console's password sign-in refuses it as
-- it refuses a wrong password. (0011 is max_agent_boxes, agent-boxes'.)
-- +goose Up
ALTER TABLE users ADD COLUMN idp text CHECK (idp IN ('github'));
ALTER TABLE users ALTER COLUMN password_hash DROP NOT NULL;
ALTER TABLE users ADD CONSTRAINT users_password_or_idp CHECK (password_hash IS NOT NULL OR idp IS NOT NULL);

-- +goose Down
ALTER TABLE users DROP CONSTRAINT users_password_or_idp;
DELETE FROM users WHERE password_hash IS NULL;
ALTER TABLE users ALTER COLUMN password_hash SET NOT NULL;
ALTER TABLE users DROP COLUMN idp;
