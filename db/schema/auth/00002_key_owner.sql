-- A key's owner: the customer it acts for (1 to 64 letters, digits, '.', '_' or '-'), or NULL
-- for a key of the platform, which acts on every wallet. A key with an owner reads and debits
-- only its owner's wallets and keeps its Idempotency-Keys among its owner's.

-- +goose Up
ALTER TABLE api_keys ADD COLUMN owner text
    CONSTRAINT api_keys_owner_format CHECK (owner ~ '^[A-Za-z0-9._-]{1,64}$');

-- +goose Down
ALTER TABLE api_keys DROP COLUMN owner;
