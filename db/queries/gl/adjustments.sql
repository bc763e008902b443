-- name: InsertAdjustment :one
-- Claims the adjustment's Idempotency-Key, first in its transaction: a concurrent request with
-- the same key waits on the unique index until this one commits (then it conflicts and answers
-- from this row) or rolls back (then it claims the key). A conflict returns no row. The entry
-- the row names is inserted after it, in the same transaction (the foreign key is deferred).
INSERT INTO adjustments (id, entry_id, idempotency_key, request_hash, reason, created_by_key)
VALUES (@id, @entry_id, @idempotency_key, @request_hash, @reason, @created_by_key)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: GetAdjustmentByKey :one
SELECT * FROM adjustments WHERE idempotency_key = @idempotency_key;

-- name: GetEntry :one
SELECT * FROM journal_entries WHERE id = @id;

-- name: ListAdjustmentsByEntries :many
-- The adjustments behind these entries, to show each adjustment entry's reason.
SELECT * FROM adjustments WHERE entry_id = ANY (@entry_ids::uuid[]);
