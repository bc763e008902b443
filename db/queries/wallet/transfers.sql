-- name: InsertTransfer :one
-- InsertTransfer claims the idempotency key. A conflict returns no row: the key was used before
-- (or is being used right now by a transaction this one waited for).
INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key)
VALUES (@id, @idempotency_key, @request_hash, @from_wallet_id, @to_wallet_id, @amount, @currency, @event_id, sqlc.narg('created_by_key')::uuid)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: InsertTransfers :many
-- InsertTransfers writes a batch of transfers in one statement, in the order given (the caller
-- sorts them by key, so two batches claim their keys in the same order). A key that another
-- transaction holds or committed comes back missing: ON CONFLICT DO NOTHING. created_at stays
-- clock_timestamp(), per row.
INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key)
SELECT unnest(@ids::uuid[]), unnest(@idempotency_keys::text[]), unnest(@request_hashes::bytea[]),
       unnest(@from_wallet_ids::text[]), unnest(@to_wallet_ids::text[]), unnest(@amounts::bigint[]),
       unnest(@currencies::text[]), unnest(@event_ids::uuid[]), nullif(unnest(@created_by_keys::uuid[]), '00000000-0000-0000-0000-000000000000'::uuid)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetTransfersByIdempotencyKeys :many
-- The keys of a batch that were used before: each is a replay (same request) or a refusal.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.idempotency_key = ANY (@idempotency_keys::text[]);

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
