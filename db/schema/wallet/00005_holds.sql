-- Holds: a two-phase movement. A hold reserves an amount of one wallet: its balance
-- stays, its held grows, and what it may spend (available = balance − held) drops. A capture
-- completes the hold as a transfer (transfers.hold_id) to a wallet named at capture and
-- releases the rest; a void (requested, or by expiry) releases all of it. Each step writes its
-- event (HoldPlaced.v1, HoldCaptured.v1, HoldVoided.v1) in the same transaction.
--
-- wallets.held is the sum of the wallet's pending holds, kept in the transaction that changes
-- a hold, under the wallet's row lock (the one every transfer takes): the funds check of a
-- hold and of a transfer reads balance and held of a locked row, so they cannot race. The
-- CHECKs keep the database, not only the code, to held ≥ 0 and, for a wallet that may not go
-- negative, balance ≥ held (its available never below zero).

-- +goose Up
ALTER TABLE wallets
    ADD COLUMN held bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT wallets_held_nonnegative CHECK (held >= 0),
    ADD CONSTRAINT wallets_available_floor CHECK (allow_negative OR balance >= held);

CREATE TABLE holds (
    id                  uuid PRIMARY KEY,
    idempotency_key     text        NOT NULL,
    request_hash        bytea       NOT NULL,
    wallet_id           text        NOT NULL REFERENCES wallets (id),
    amount              bigint      NOT NULL CHECK (amount > 0),
    currency            text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status              text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'captured', 'voided')),
    void_reason         text        CHECK (void_reason IN ('requested', 'expired')),
    expires_at          timestamptz NOT NULL,
    captured_amount     bigint,
    capture_transfer_id uuid,
    -- The outbox rows of the hold: HoldPlaced, and HoldCaptured or HoldVoided once it finished.
    placed_event_id     uuid        NOT NULL UNIQUE,
    finished_event_id   uuid UNIQUE,
    created_by_key      uuid REFERENCES api_keys (id),
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at         timestamptz,
    CONSTRAINT holds_idempotency_key_key UNIQUE (idempotency_key),
    -- Each status has exactly the columns it promises.
    CONSTRAINT holds_status_columns CHECK (
        CASE status
            WHEN 'pending' THEN void_reason IS NULL AND captured_amount IS NULL AND capture_transfer_id IS NULL
                                AND finished_event_id IS NULL AND finished_at IS NULL
            WHEN 'captured' THEN void_reason IS NULL AND captured_amount > 0 AND captured_amount <= amount
                                 AND capture_transfer_id IS NOT NULL AND finished_event_id IS NOT NULL
                                 AND finished_at IS NOT NULL
            WHEN 'voided' THEN void_reason IS NOT NULL AND captured_amount IS NULL AND capture_transfer_id IS NULL
                               AND finished_event_id IS NOT NULL AND finished_at IS NOT NULL
        END)
);

-- The expiry worker's scan: pending holds by expiry.
CREATE INDEX holds_pending_expires_at_idx ON holds (expires_at) WHERE status = 'pending';
CREATE INDEX holds_wallet_id_idx ON holds (wallet_id) WHERE status = 'pending';

-- A capture's transfer names its hold; at most one transfer per hold.
ALTER TABLE transfers ADD COLUMN hold_id uuid REFERENCES holds (id);
CREATE UNIQUE INDEX transfers_hold_id_key ON transfers (hold_id) WHERE hold_id IS NOT NULL;
ALTER TABLE holds ADD CONSTRAINT holds_capture_transfer_id_fkey
    FOREIGN KEY (capture_transfer_id) REFERENCES transfers (id);

-- +goose Down
ALTER TABLE holds DROP CONSTRAINT holds_capture_transfer_id_fkey;
DROP INDEX transfers_hold_id_key;
ALTER TABLE transfers DROP COLUMN hold_id;
DROP TABLE holds;
ALTER TABLE wallets
    DROP CONSTRAINT wallets_available_floor,
    DROP CONSTRAINT wallets_held_nonnegative,
    DROP COLUMN held;
