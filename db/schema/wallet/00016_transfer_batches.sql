-- Atomic batches of transfers (POST /v1/transfer-batches) and their reversals.
--
-- A batch is one transaction: a transfer_batches row, one transfers row per leg (batch_id,
-- batch_leg: its 0-based place in the request), the balances, and ONE outbox row,
-- TransferBatchCompleted.v1, whose id is the batch's event_id and every leg's event_id: a leg's
-- outbox status is its batch's, read through the join every transfer query makes. A batch
-- reversal writes a batch_reversals row, one reversal per chosen leg (reverses_transfer_id the
-- leg, batch_reversal_id the batch reversal, event_id the batch reversal's) and ONE outbox row,
-- TransferBatchReversed.v1. So event_id is unique among the transfers that have an event of
-- their own only (transfers_event_id_key, partial now); the rows of one batch (or batch
-- reversal) share theirs.
--
-- Idempotency-Keys: a batch's key lives in transfer_batches (a key space of its own, per
-- owner), a batch reversal's in batch_reversals. A leg or a leg's reversal claims no key of
-- its own: its idempotency_key is its batch's (so a client sees the key it sent), and its
-- idempotency_owner 'batch:<batch id>:<leg>' (resp. 'batch-reversal:<id>:<leg>'), which no
-- owner's name can be (':' is outside wallets_owner_format) and which no request looks up.
--
-- A leg of a batch is reversed with its batch (POST /v1/transfer-batches/{id}/reversals), in
-- full, never alone: transfers_batch_leg_reversal keeps a leg's reversals to batch reversals.

-- +goose Up
CREATE TABLE transfer_batches (
    id                uuid PRIMARY KEY,
    idempotency_owner text        NOT NULL,
    idempotency_key   text        NOT NULL,
    request_hash      bytea       NOT NULL,
    legs              integer     NOT NULL CHECK (legs BETWEEN 1 AND 100),
    metadata          jsonb       NOT NULL DEFAULT '{}'
        CONSTRAINT transfer_batches_metadata_strings CHECK (
            jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")')),
    event_id          uuid        NOT NULL UNIQUE,
    created_by_key    uuid REFERENCES api_keys (id),
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT transfer_batches_idempotency_key_key UNIQUE (idempotency_owner, idempotency_key)
);
CREATE INDEX transfer_batches_created_at_idx ON transfer_batches (created_at, id);

CREATE TABLE batch_reversals (
    id                uuid PRIMARY KEY,
    batch_id          uuid        NOT NULL REFERENCES transfer_batches (id),
    idempotency_owner text        NOT NULL,
    idempotency_key   text        NOT NULL,
    request_hash      bytea       NOT NULL,
    legs              integer     NOT NULL CHECK (legs BETWEEN 1 AND 100),
    metadata          jsonb       NOT NULL DEFAULT '{}'
        CONSTRAINT batch_reversals_metadata_strings CHECK (
            jsonb_typeof(metadata) = 'object' AND NOT jsonb_path_exists(metadata, '$.* ? (@.type() != "string")')),
    event_id          uuid        NOT NULL UNIQUE,
    created_by_key    uuid REFERENCES api_keys (id),
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT batch_reversals_idempotency_key_key UNIQUE (idempotency_owner, idempotency_key)
);
CREATE INDEX batch_reversals_batch_id_idx ON batch_reversals (batch_id, created_at, id);
CREATE INDEX batch_reversals_created_at_idx ON batch_reversals (created_at, id);

ALTER TABLE transfers
    ADD COLUMN batch_id          uuid REFERENCES transfer_batches (id),
    ADD COLUMN batch_leg         integer,
    ADD COLUMN batch_reversal_id uuid REFERENCES batch_reversals (id),
    -- A leg is a plain transfer: neither a reversal nor a capture, and it has its place.
    ADD CONSTRAINT transfers_batch_leg CHECK (
        (batch_id IS NULL AND batch_leg IS NULL)
        OR (batch_leg BETWEEN 0 AND 99 AND reverses_transfer_id IS NULL AND hold_id IS NULL)),
    ADD CONSTRAINT transfers_batch_reversal CHECK (
        batch_reversal_id IS NULL OR (reverses_transfer_id IS NOT NULL AND batch_id IS NULL AND NOT forced));

-- The rows of one batch share its event id: unique among the others alone.
ALTER TABLE transfers DROP CONSTRAINT transfers_event_id_key;
CREATE UNIQUE INDEX transfers_event_id_key ON transfers (event_id)
    WHERE batch_id IS NULL AND batch_reversal_id IS NULL;
CREATE UNIQUE INDEX transfers_batch_leg_key ON transfers (batch_id, batch_leg) WHERE batch_id IS NOT NULL;
-- GET /v1/transfers?batch_id= pages a batch's legs in listing order.
CREATE INDEX transfers_batch_id_idx ON transfers (batch_id, created_at, id) WHERE batch_id IS NOT NULL;
CREATE INDEX transfers_batch_reversal_id_idx ON transfers (batch_reversal_id) WHERE batch_reversal_id IS NOT NULL;

-- reconcile_transfers_v4: reconcile_transfers_v3's columns and entry_key, the key of the GL
-- journal entry that posts the movement (journal_entries.transfer_id): the transfer's (or
-- reversal's) own id, a leg's batch id, a batch-reversed leg's reversal's batch reversal id.
-- A published contract like v1 to v3: its columns and their meaning never change. The GL reads
-- the newest it finds, falling back to the older ones.
CREATE VIEW reconcile_transfers_v4 AS
SELECT t.id, t.amount, t.currency, t.created_at, t.reverses_transfer_id,
       CASE WHEN t.reverses_transfer_id IS NOT NULL THEN NULL
            WHEN f.allow_negative THEN 'deposit'
            WHEN w.allow_negative THEN 'withdrawal'
            ELSE 'transfer' END::text AS kind,
       coalesce(t.batch_id, t.batch_reversal_id, t.id)::text AS entry_key
FROM transfers t
JOIN wallets f ON f.id = t.from_wallet_id
JOIN wallets w ON w.id = t.to_wallet_id;

COMMENT ON VIEW reconcile_transfers_v4 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): transfers, reversals, kinds and GL entry keys; columns never change, see db/schema/wallet/00016_transfer_batches.sql';

-- reconcile_movements_v2: reconcile_movements_v1's columns, with movement_id the GL entry key
-- as in reconcile_transfers_v4: a leg's balance changes are keyed by its batch id, a
-- batch-reversed leg's by its batch reversal id. Rows are not summed: a wallet that several
-- legs of one batch touch has a row per leg and side.
CREATE VIEW reconcile_movements_v2 AS
SELECT coalesce(t.batch_id, t.batch_reversal_id, t.id)::text AS movement_id, t.from_wallet_id AS wallet_id, t.currency,
       (-t.amount)::bigint AS balance_change, 0::bigint AS held_change
FROM transfers t
UNION ALL
SELECT coalesce(t.batch_id, t.batch_reversal_id, t.id)::text, t.to_wallet_id, t.currency, t.amount, 0::bigint
FROM transfers t
UNION ALL
SELECT 'hold:' || h.id::text || ':placed', h.wallet_id, h.currency, 0::bigint, h.amount
FROM holds h
UNION ALL
SELECT 'hold:' || h.id::text || ':released', h.wallet_id, h.currency, 0::bigint, -h.amount
FROM holds h
WHERE h.status <> 'pending';

COMMENT ON VIEW reconcile_movements_v2 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): each movement''s change to each wallet, keyed by GL entry; columns never change, see db/schema/wallet/00016_transfer_batches.sql';

-- +goose Down
DROP VIEW reconcile_movements_v2;
DROP VIEW reconcile_transfers_v4;
DROP INDEX transfers_batch_reversal_id_idx;
DROP INDEX transfers_batch_id_idx;
DROP INDEX transfers_batch_leg_key;
DROP INDEX transfers_event_id_key;
ALTER TABLE transfers ADD CONSTRAINT transfers_event_id_key UNIQUE (event_id);
ALTER TABLE transfers
    DROP CONSTRAINT transfers_batch_reversal,
    DROP CONSTRAINT transfers_batch_leg,
    DROP COLUMN batch_reversal_id,
    DROP COLUMN batch_leg,
    DROP COLUMN batch_id;
DROP TABLE batch_reversals;
DROP TABLE transfer_batches;
