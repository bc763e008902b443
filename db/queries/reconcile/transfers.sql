-- name: ReconcileTransfers :many
-- ReconcileTransfers pages through every transfer in id order (the primary key's index).
SELECT id, amount, currency
FROM reconcile_transfers_v1
WHERE id > @after::uuid
ORDER BY id
LIMIT @row_limit;

-- name: ReconcileTransfer :one
SELECT id, amount, currency
FROM reconcile_transfers_v1
WHERE id = @id;
