-- Owners: whose money a wallet holds, and whose Idempotency-Keys are whose.
--
-- wallets.owner is the owner of the key that created the wallet (NULL: the platform's). A key
-- with an owner reads only its owner's wallets, the transfers from or to them and the holds on
-- them, and debits only its owner's wallets; it may pay into any wallet.
--
-- Idempotency-Keys belong to the owner of the key that sent them ('' for the platform):
-- idempotency_owner scopes the uniqueness of transfers' keys (one space with reversals and
-- captures) and of holds' keys. An instance built before this migration claims keys with
-- ON CONFLICT (idempotency_key), which no longer names a unique constraint: stop every wallet
-- instance before migrating (docs/operations.md, "Upgrades").
--
-- refusals keeps the answer of a request refused once it started executing (a 422 such as
-- insufficient-funds) under its key, for RefusalRetention: the same key and body replay it,
-- another body is idempotency-key-reused. Expired rows are replaced by a new refusal of their
-- key and deleted, a few at a time, by each new refusal: the table stays bounded by the
-- refusals of one retention.

-- +goose Up
ALTER TABLE wallets ADD COLUMN owner text
    CONSTRAINT wallets_owner_format CHECK (owner ~ '^[A-Za-z0-9._-]{1,64}$');
CREATE INDEX wallets_owner_idx ON wallets (owner) WHERE owner IS NOT NULL;

ALTER TABLE transfers ADD COLUMN idempotency_owner text NOT NULL DEFAULT '';
ALTER TABLE transfers DROP CONSTRAINT transfers_idempotency_key_key;
ALTER TABLE transfers ADD CONSTRAINT transfers_idempotency_key_key UNIQUE (idempotency_owner, idempotency_key);

ALTER TABLE holds ADD COLUMN idempotency_owner text NOT NULL DEFAULT '';
ALTER TABLE holds DROP CONSTRAINT holds_idempotency_key_key;
ALTER TABLE holds ADD CONSTRAINT holds_idempotency_key_key UNIQUE (idempotency_owner, idempotency_key);

CREATE TABLE refusals (
    -- transfer: the key space of transfers, reversals and captures; hold: that of holds.
    key_space         text        NOT NULL CHECK (key_space IN ('transfer', 'hold')),
    idempotency_owner text        NOT NULL,
    idempotency_key   text        NOT NULL,
    request_hash      bytea       NOT NULL,
    problem_type      text        NOT NULL, -- the problem's slug, such as insufficient-funds
    detail            text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at        timestamptz NOT NULL,
    PRIMARY KEY (key_space, idempotency_owner, idempotency_key)
);
CREATE INDEX refusals_expires_at_idx ON refusals (expires_at);

-- +goose Down
DROP TABLE refusals;
ALTER TABLE holds DROP CONSTRAINT holds_idempotency_key_key;
ALTER TABLE holds ADD CONSTRAINT holds_idempotency_key_key UNIQUE (idempotency_key);
ALTER TABLE holds DROP COLUMN idempotency_owner;
ALTER TABLE transfers DROP CONSTRAINT transfers_idempotency_key_key;
ALTER TABLE transfers ADD CONSTRAINT transfers_idempotency_key_key UNIQUE (idempotency_key);
ALTER TABLE transfers DROP COLUMN idempotency_owner;
DROP INDEX wallets_owner_idx;
ALTER TABLE wallets DROP COLUMN owner;
