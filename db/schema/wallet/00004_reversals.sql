-- Reversals: a reversal is a money movement of its own, stored as a transfer that
-- names the transfer it reverses (reverses_transfer_id) and moves money the other way. It has
-- its own id, Idempotency-Key (one key space with transfers), event (TransferReversed.v1) and
-- GL entry, so every guarantee of a transfer (outbox, inbox, exactly-once posting, reconcile,
-- replay) holds for it unchanged.
--
-- reversed_amount is the running total of an original's reversals. The database, not only the
-- code, keeps it within the original's amount: the CHECK refuses any reversal that would take
-- it past, and the row is locked (FOR NO KEY UPDATE) by every reversal of it, so concurrent
-- reversals are serialised on it. A reversal is never reversed itself.

-- +goose Up
ALTER TABLE transfers
    ADD COLUMN reverses_transfer_id uuid REFERENCES transfers (id),
    ADD COLUMN reversed_amount bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT transfers_reversed_within_amount CHECK (reversed_amount >= 0 AND reversed_amount <= amount),
    ADD CONSTRAINT transfers_reversal_not_reversed CHECK (reverses_transfer_id IS NULL OR reversed_amount = 0);

CREATE INDEX transfers_reverses_transfer_id_idx ON transfers (reverses_transfer_id, created_at, id)
    WHERE reverses_transfer_id IS NOT NULL;

-- v1 keeps its promise to the GLs that read it: transfers, each posted by the transfer rule.
-- Reversals are posted the other way, so only v2, which names them, shows them.
CREATE OR REPLACE VIEW reconcile_transfers_v1 AS
SELECT id, amount, currency, created_at
FROM transfers
WHERE reverses_transfer_id IS NULL;

-- reconcile_transfers_v2: reconcile_transfers_v1's columns for every movement, reversals
-- included, and reverses_transfer_id: the transfer a reversal reverses (NULL for a transfer).
-- A published contract like v1: its columns and their meaning never change.
CREATE VIEW reconcile_transfers_v2 AS
SELECT id, amount, currency, created_at, reverses_transfer_id
FROM transfers;

COMMENT ON VIEW reconcile_transfers_v2 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): transfers and reversals; columns never change, see db/schema/wallet/00004_reversals.sql';

-- +goose Down
DROP VIEW reconcile_transfers_v2;
CREATE OR REPLACE VIEW reconcile_transfers_v1 AS
SELECT id, amount, currency, created_at
FROM transfers;
DROP INDEX transfers_reverses_transfer_id_idx;
ALTER TABLE transfers
    DROP CONSTRAINT transfers_reversal_not_reversed,
    DROP CONSTRAINT transfers_reversed_within_amount,
    DROP COLUMN reversed_amount,
    DROP COLUMN reverses_transfer_id;
