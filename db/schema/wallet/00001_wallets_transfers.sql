-- Wallets and transfers. The outbox lives in the events set (db/schema/events), applied first.

-- +goose Up
CREATE TABLE wallets (
    id             text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    currency       text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    balance        bigint      NOT NULL DEFAULT 0,
    allow_negative boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- The floor: a wallet that is not a funding source never goes below zero.
    CONSTRAINT wallets_balance_floor CHECK (allow_negative OR balance >= 0)
);

CREATE TABLE transfers (
    id              uuid PRIMARY KEY,
    idempotency_key text        NOT NULL,
    request_hash    bytea       NOT NULL,
    from_wallet_id  text        NOT NULL REFERENCES wallets (id),
    to_wallet_id    text        NOT NULL REFERENCES wallets (id),
    amount          bigint      NOT NULL CHECK (amount > 0),
    currency        text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status          text        NOT NULL DEFAULT 'completed' CHECK (status IN ('completed')),
    event_id        uuid        NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT transfers_idempotency_key_key UNIQUE (idempotency_key),
    CONSTRAINT transfers_distinct_wallets CHECK (from_wallet_id <> to_wallet_id)
);

CREATE INDEX transfers_created_at_idx ON transfers (created_at, id);

-- +goose Down
DROP TABLE transfers;
DROP TABLE wallets;
