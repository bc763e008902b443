-- name: InsertTransfer :one
-- InsertTransfer claims the idempotency key. A conflict returns no row: the key was used before
-- (or is being used right now by a transaction this one waited for).
INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
VALUES (@id, @idempotency_key, @request_hash, @from_wallet_id, @to_wallet_id, @amount, @currency, @event_id)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetTransferByIdempotencyKey :one
-- A replayed request answers with the transfer as it is now, outbox status included.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.idempotency_key = @idempotency_key;

-- name: GetTransferWithOutbox :one
-- Acknowledged rows are deleted by retention, so a transfer without its outbox row was acknowledged.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.id = @id;

-- name: ListTransfers :many
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE (t.created_at, t.id) > (@after_created_at::timestamptz, @after_id::uuid)
ORDER BY t.created_at, t.id
LIMIT @row_limit;
