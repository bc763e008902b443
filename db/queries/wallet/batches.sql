-- Atomic batches of transfers and their reversals (db/schema/wallet/00016). A batch's rows
-- share its event id (transfers.event_id of each leg is the batch's), so each leg's outbox
-- status is its batch's.

-- name: InsertTransferBatch :one
-- InsertTransferBatch claims the batch's idempotency key, as InsertTransfer does a transfer's:
-- a conflict returns no row.
INSERT INTO transfer_batches (id, idempotency_owner, idempotency_key, request_hash, legs, metadata, event_id, created_by_key)
VALUES (@id, @idempotency_owner, @idempotency_key, @request_hash, @legs, @metadata, @event_id, sqlc.narg('created_by_key')::uuid)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetTransferBatchByIdempotencyKey :one
SELECT sqlc.embed(b), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfer_batches b
LEFT JOIN outbox o ON o.id = b.event_id
WHERE b.idempotency_owner = @idempotency_owner AND b.idempotency_key = @idempotency_key;

-- name: GetTransferBatch :one
-- With an owner, only a batch whose every leg is from or to one of the owner's wallets.
SELECT sqlc.embed(b), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfer_batches b
LEFT JOIN outbox o ON o.id = b.event_id
WHERE b.id = @id
  AND (sqlc.narg('owner')::text IS NULL
       OR NOT EXISTS (SELECT 1 FROM transfers l
                      WHERE l.batch_id = b.id
                        AND NOT EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (l.from_wallet_id, l.to_wallet_id)
                                                                  AND w.owner = sqlc.narg('owner')::text)));

-- name: InsertBatchLegs :many
-- The legs of a batch in one statement, in their order (@legs: 0, 1, …); each shares the batch's key (under an
-- owner of its own, batch:<batch id>:<leg>), metadata and event id.
INSERT /* fixed plan */ INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency,
                                        event_id, created_by_key, reference, metadata, batch_id, batch_leg)
SELECT l.id, l.idempotency_owner, @idempotency_key::text, @request_hash::bytea,
       l.from_wallet_id, l.to_wallet_id, l.amount, l.currency,
       @event_id::uuid, sqlc.narg('created_by_key')::uuid, l.reference, @metadata::jsonb, @batch_id::uuid, l.leg
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@legs::integer[]) AS leg, unnest(@idempotency_owners::text[]) AS idempotency_owner,
             unnest(@from_wallet_ids::text[]) AS from_wallet_id, unnest(@to_wallet_ids::text[]) AS to_wallet_id,
             unnest(@amounts::bigint[]) AS amount, unnest(@currencies::text[]) AS currency,
             unnest(@transfer_references::text[]) AS reference) AS l
ORDER BY l.leg
RETURNING *;

-- name: ListBatchLegs :many
-- A batch's legs in their order.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.batch_id = @batch_id
ORDER BY t.batch_leg;

-- name: LockBatchLegs :many
-- A batch reversal locks its batch's legs after the wallets (the order every writer takes),
-- so concurrent reversals of one batch see each other's reversed_amount.
SELECT * FROM transfers WHERE batch_id = @batch_id ORDER BY batch_leg FOR NO KEY UPDATE;

-- name: ListBatchReversals :many
-- A batch's reversals, oldest first.
SELECT * FROM batch_reversals WHERE batch_id = @batch_id ORDER BY created_at, id;

-- name: InsertBatchReversal :one
-- InsertBatchReversal claims the batch reversal's idempotency key: a conflict returns no row.
INSERT INTO batch_reversals (id, batch_id, idempotency_owner, idempotency_key, request_hash, legs, metadata, event_id, created_by_key)
VALUES (@id, @batch_id, @idempotency_owner, @idempotency_key, @request_hash, @legs, @metadata, @event_id, sqlc.narg('created_by_key')::uuid)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetBatchReversalByIdempotencyKey :one
SELECT sqlc.embed(r), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM batch_reversals r
LEFT JOIN outbox o ON o.id = r.event_id
WHERE r.idempotency_owner = @idempotency_owner AND r.idempotency_key = @idempotency_key;

-- name: GetBatchReversal :one
SELECT sqlc.embed(r), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM batch_reversals r
LEFT JOIN outbox o ON o.id = r.event_id
WHERE r.id = @id;

-- name: InsertLegReversals :many
-- The reversals of a batch reversal's legs in one statement, in the legs' order; each moves
-- its whole leg back, shares the batch reversal's key (under an owner of its own,
-- batch-reversal:<id>:<leg>), metadata and event id.
INSERT /* fixed plan */ INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency,
                                        event_id, created_by_key, metadata, reverses_transfer_id, batch_reversal_id)
SELECT r.id, r.idempotency_owner, @idempotency_key::text, @request_hash::bytea,
       l.to_wallet_id, l.from_wallet_id, l.amount, l.currency,
       @event_id::uuid, sqlc.narg('created_by_key')::uuid, @metadata::jsonb, l.id, @batch_reversal_id::uuid
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@leg_ids::uuid[]) AS leg_id, unnest(@idempotency_owners::text[]) AS idempotency_owner) AS r
JOIN transfers l ON l.id = r.leg_id
ORDER BY l.batch_leg
RETURNING *;

-- name: ReverseLegsInFull :execrows
-- Each leg reversed in full; the check transfers_reversed_within_amount refuses a leg
-- reversed already.
UPDATE transfers SET reversed_amount = reversed_amount + amount
WHERE id = ANY (@ids::uuid[]);

-- name: ListBatchReversalLegs :many
-- The reversals a batch reversal made, in its legs' order.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
JOIN transfers l ON l.id = t.reverses_transfer_id
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.batch_reversal_id = @batch_reversal_id
ORDER BY l.batch_leg;

-- name: ListTransfersOfBatch :many
-- The legs of batch @batch_id after the cursor, in listing order (at most contract.MaxBatchLegs
-- rows to filter), with the listing's other filters (empty for any) and, with an owner,
-- only those the owner may see, as in ListTransfers.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.batch_id = @batch_id
  AND (t.created_at, t.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (@wallet_id::text = '' OR @wallet_id::text IN (t.from_wallet_id, t.to_wallet_id))
  AND (@reference::text = '' OR t.reference = @reference::text)
  AND t.metadata @> @metadata::jsonb
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at, t.id
LIMIT @row_limit;
