-- Which API key made each transfer (internal/auth's api_keys): the audit of money movement.
-- NULL for transfers made before the API required keys.

-- +goose Up
ALTER TABLE transfers ADD COLUMN created_by_key uuid REFERENCES api_keys (id);

-- +goose Down
ALTER TABLE transfers DROP COLUMN created_by_key;
