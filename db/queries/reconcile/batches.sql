
-- name: ReconcileTransfersV4 :many
-- ReconcileTransfersV3 through reconcile_transfers_v4: with the GL entry key that posts each
-- transfer (a batch's id for its leg, a batch reversal's id for a leg reversal).
SELECT id, amount, currency, reverses_transfer_id, coalesce(kind, '')::text AS kind, entry_key::text AS entry_key
FROM reconcile_transfers_v4
WHERE id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: ReconcileTransferV4 :one
SELECT id, amount, currency, reverses_transfer_id, coalesce(kind, '')::text AS kind, entry_key::text AS entry_key
FROM reconcile_transfers_v4
WHERE id = @id;

-- name: ReconcileMovementsV2 :many
-- ReconcileMovements through reconcile_movements_v2: a batch's legs keyed by their entry key.
SELECT movement_id, wallet_id, currency, balance_change, held_change
FROM reconcile_movements_v2;
