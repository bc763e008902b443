-- name: ReconcileTransfers :many
-- ReconcileTransfers pages through every transfer and reversal in id order (the primary key's
-- index).
SELECT id, amount, currency, reverses_transfer_id
FROM reconcile_transfers_v2
WHERE id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: ReconcileTransfer :one
SELECT id, amount, currency, reverses_transfer_id
FROM reconcile_transfers_v2
WHERE id = @id;

-- name: ReconcileTransfersV3 :many
-- ReconcileTransfers through reconcile_transfers_v3: with each transfer's kind.
SELECT id, amount, currency, reverses_transfer_id, coalesce(kind, '')::text AS kind
FROM reconcile_transfers_v3
WHERE id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: ReconcileTransferV3 :one
SELECT id, amount, currency, reverses_transfer_id, coalesce(kind, '')::text AS kind
FROM reconcile_transfers_v3
WHERE id = @id;

-- name: ReconcileHolds :many
-- ReconcileHolds pages through every hold in id order (the primary key's index).
SELECT id, wallet_id, amount, currency, status
FROM reconcile_holds_v1
WHERE id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: ReconcileHold :one
SELECT id, wallet_id, amount, currency, status
FROM reconcile_holds_v1
WHERE id = @id;

-- name: ReconcileBalances :many
-- Every wallet's balance and held amount, read in the same snapshot as ReconcileMovements.
SELECT wallet_id, currency, balance, held, allow_negative
FROM reconcile_balances_v1
ORDER BY wallet_id;

-- name: ReconcileMovements :many
-- What each movement did to each wallet, keyed as the GL's journal keys it.
SELECT movement_id, wallet_id, currency, balance_change, held_change
FROM reconcile_movements_v1;
