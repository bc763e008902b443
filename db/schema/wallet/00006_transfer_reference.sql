-- A transfer's reference: the payer's free text, optional (empty when not given),
-- carried by its TransferCompleted.v2 event to the GL. The transfer's kind is not stored: it
-- follows from its wallets' allow_negative flags, which never change, and the event carries it.

-- +goose Up
ALTER TABLE transfers ADD COLUMN reference text NOT NULL DEFAULT ''
    CONSTRAINT transfers_reference_length CHECK (char_length(reference) <= 140);

-- reconcile_transfers_v3: reconcile_transfers_v2's columns and the movement's kind, as its
-- TransferCompleted.v2 says it (from the wallets' allow_negative flags; NULL for a reversal,
-- whose entry follows its original's). A published contract like v1 and v2: its columns and
-- their meaning never change. The GL reads it when it may, else v2 (without kinds).
CREATE VIEW reconcile_transfers_v3 AS
SELECT t.id, t.amount, t.currency, t.created_at, t.reverses_transfer_id,
       CASE WHEN t.reverses_transfer_id IS NOT NULL THEN NULL
            WHEN f.allow_negative THEN 'deposit'
            WHEN w.allow_negative THEN 'withdrawal'
            ELSE 'transfer' END::text AS kind
FROM transfers t
JOIN wallets f ON f.id = t.from_wallet_id
JOIN wallets w ON w.id = t.to_wallet_id;

COMMENT ON VIEW reconcile_transfers_v3 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): transfers, reversals and kinds; columns never change, see db/schema/wallet/00006_transfer_reference.sql';

-- +goose Down
DROP VIEW reconcile_transfers_v3;
ALTER TABLE transfers DROP COLUMN reference;
