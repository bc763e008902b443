-- name: InsertHold :one
-- InsertHold claims the hold's idempotency key as InsertTransfer claims a transfer's: a conflict
-- returns no row (the key was used before, or is being used by a transaction this one waited for).
INSERT INTO holds (id, idempotency_owner, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id, created_by_key, metadata)
VALUES (@id, @idempotency_owner, @idempotency_key, @request_hash, @wallet_id, @amount, @currency, @expires_at, @placed_event_id,
        sqlc.narg('created_by_key')::uuid, @metadata)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetHold :one
-- With an owner, only a hold on one of the owner's wallets is found.
SELECT * FROM holds h
WHERE h.id = @id
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id = h.wallet_id AND w.owner = sqlc.narg('owner')::text));

-- name: GetHoldByIdempotencyKey :one
SELECT * FROM holds WHERE idempotency_owner = @idempotency_owner AND idempotency_key = @idempotency_key;

-- name: LockHold :one
-- Every change of a hold locks its row after its wallets (the order all writers take), so a
-- capture and a void of one hold are serialised and the second sees the first's status.
SELECT * FROM holds WHERE id = @id FOR NO KEY UPDATE;

-- name: CaptureHold :one
UPDATE holds
SET status = 'captured', captured_amount = @captured_amount, capture_transfer_id = @capture_transfer_id,
    finished_event_id = @finished_event_id, finished_at = clock_timestamp()
WHERE id = @id AND status = 'pending'
RETURNING *;

-- name: VoidHold :one
UPDATE holds
SET status = 'voided', void_reason = @void_reason, finished_event_id = @finished_event_id,
    finished_at = clock_timestamp()
WHERE id = @id AND status = 'pending'
RETURNING *;

-- name: AddToHeld :execrows
-- AddToHeld changes one wallet's held; the CHECKs refuse a negative held and, for a wallet that
-- may not go negative, a held beyond its balance.
UPDATE wallets SET held = held + @delta, updated_at = clock_timestamp()
WHERE id = @id;

-- name: ExpiredHolds :many
-- Candidates for the expiry worker: pending holds whose expiry passed, oldest expiry first,
-- read without a lock; LockExpiredHolds takes them after their wallets.
SELECT id, wallet_id FROM holds
WHERE status = 'pending' AND expires_at <= clock_timestamp()
ORDER BY expires_at, id
LIMIT @row_limit;

-- name: LockExpiredHolds :many
-- The candidates that are still pending and expired, locked after their wallets (the order all
-- writers take), skipping those another transaction holds: a capture or void in flight, or
-- another instance's expiry worker.
SELECT * FROM holds
WHERE id = ANY (@ids::uuid[]) AND status = 'pending' AND expires_at <= clock_timestamp()
ORDER BY id
FOR NO KEY UPDATE SKIP LOCKED;

-- name: InsertCaptureTransfer :one
-- The transfer of a capture: an ordinary transfer that names its hold, whose Idempotency-Key
-- is the capture's (one key space with transfers and reversals) and whose metadata are the hold's.
INSERT INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key, hold_id, metadata)
VALUES (@id, @idempotency_owner, @idempotency_key, @request_hash, @from_wallet_id, @to_wallet_id, @amount, @currency, @event_id,
        sqlc.narg('created_by_key')::uuid, @hold_id, @metadata)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: ListHolds :many
-- Every hold, oldest first, with its capture's receiver (GET /v1/holds; holds_created_at_idx).
SELECT sqlc.embed(h), coalesce(t.to_wallet_id, '')::text AS to_wallet_id
FROM holds h
LEFT JOIN transfers t ON t.id = h.capture_transfer_id
WHERE (h.created_at, h.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id = h.wallet_id AND w.owner = sqlc.narg('owner')::text))
ORDER BY h.created_at, h.id
LIMIT @row_limit;

-- name: ListHoldsByMetadata :many
-- ListHolds of the holds whose metadata contains @metadata (every pair of it). The matches are
-- found first, in a bitmap scan of holds_metadata_idx (db/schema/wallet/00015), then bounded
-- by the cursor and sorted, as ListTransfersByMetadata does: a page costs what the filter
-- matches, not the number of holds.
WITH matched AS MATERIALIZED (
    SELECT m.id, m.created_at FROM holds m
    WHERE m.metadata @> @metadata::jsonb AND m.metadata <> '{}' -- the index's predicate: @metadata is never {}
)
SELECT sqlc.embed(h), coalesce(t.to_wallet_id, '')::text AS to_wallet_id
FROM matched m
JOIN holds h ON h.id = m.id
LEFT JOIN transfers t ON t.id = h.capture_transfer_id
WHERE (m.created_at, m.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id = h.wallet_id AND w.owner = sqlc.narg('owner')::text))
ORDER BY m.created_at, m.id
LIMIT @row_limit;

-- name: HoldCursorExists :one
-- Whether a listing's cursor names a hold the owner may see (NULL: any), at the time the cursor
-- says: one that names none was not handed out by this service.
SELECT EXISTS (
    SELECT 1 FROM holds h
    WHERE h.id = @id AND h.created_at = @created_at
      AND (sqlc.narg('owner')::text IS NULL
           OR EXISTS (SELECT 1 FROM wallets w WHERE w.id = h.wallet_id AND w.owner = sqlc.narg('owner')::text)));
