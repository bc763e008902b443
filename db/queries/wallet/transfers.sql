-- name: InsertTransfer :one
-- InsertTransfer claims the idempotency key. A conflict returns no row: the key was used before
-- (or is being used right now by a transaction this one waited for).
INSERT INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key, reference, metadata)
VALUES (@id, @idempotency_owner, @idempotency_key, @request_hash, @from_wallet_id, @to_wallet_id, @amount, @currency, @event_id, sqlc.narg('created_by_key')::uuid, @reference, @metadata)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: InsertTransfers :many
-- InsertTransfers writes a batch of transfers in one statement, in the order given (the caller
-- sorts them by key, so two batches claim their keys in the same order). A key that another
-- transaction holds or committed comes back missing: ON CONFLICT DO NOTHING. created_at stays
-- clock_timestamp(), per row.
INSERT /* fixed plan */ INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key, reference, metadata)
SELECT unnest(@ids::uuid[]), unnest(@idempotency_owners::text[]), unnest(@idempotency_keys::text[]), unnest(@request_hashes::bytea[]),
       unnest(@from_wallet_ids::text[]), unnest(@to_wallet_ids::text[]), unnest(@amounts::bigint[]),
       unnest(@currencies::text[]), unnest(@event_ids::uuid[]), nullif(unnest(@created_by_keys::uuid[]), '00000000-0000-0000-0000-000000000000'::uuid),
       unnest(@transfer_references::text[]), unnest(@metadata::text[])::jsonb
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: GetTransfersByIdempotencyKeys :many
-- The keys of a batch that were used before: each is a replay (same request) or a refusal.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
JOIN (SELECT unnest(@idempotency_owners::text[]) AS owner, unnest(@idempotency_keys::text[]) AS key) AS k
  ON t.idempotency_owner = k.owner AND t.idempotency_key = k.key;

-- name: GetTransferByIdempotencyKey :one
-- A replayed request answers with the transfer as it is now, outbox status included.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.idempotency_owner = @idempotency_owner AND t.idempotency_key = @idempotency_key;

-- name: GetTransferWithOutbox :one
-- Acknowledged rows are deleted by retention, so a transfer without its outbox row was acknowledged.
-- With an owner, only a transfer from or to one of the owner's wallets is found.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.id = @id
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text));

-- name: ListTransfers :many
-- With an owner, only the transfers from or to the owner's wallets.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE (t.created_at, t.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at, t.id
LIMIT @row_limit;

-- name: ListTransfersOfWallet :many
-- The transfers from or to @wallet_id after the cursor, oldest first, each side a range of its
-- index (transfers_from_wallet_idx, transfers_to_wallet_idx, db/schema/wallet/00010) that
-- stops at the page's end, however long the wallet's history; a transfer has two distinct
-- wallets, so none is listed twice. With an owner, only those the owner may see, as in
-- ListTransfers, filtered in each side so that a page is short only at the end.
WITH page AS (
    (SELECT f.id FROM transfers f
     WHERE f.from_wallet_id = @wallet_id AND (f.created_at, f.id) > (@after_created_at::timestamptz, @after_id::uuid)
       AND (sqlc.narg('owner')::text IS NULL
            OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (f.from_wallet_id, f.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
     ORDER BY f.created_at, f.id
     LIMIT @row_limit)
    UNION ALL
    (SELECT r.id FROM transfers r
     WHERE r.to_wallet_id = @wallet_id AND (r.created_at, r.id) > (@after_created_at::timestamptz, @after_id::uuid)
       AND (sqlc.narg('owner')::text IS NULL
            OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (r.from_wallet_id, r.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
     ORDER BY r.created_at, r.id
     LIMIT @row_limit)
)
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM page p
JOIN transfers t ON t.id = p.id
LEFT JOIN outbox o ON o.id = t.event_id
ORDER BY t.created_at, t.id
LIMIT @row_limit;

-- name: ListTransfersByReference :many
-- The transfers whose reference is @reference after the cursor, oldest first: a range of
-- transfers_reference_idx (db/schema/wallet/00010). With @wallet_id ('' for any), only those
-- from or to that wallet; with an owner, only those the owner may see, as in ListTransfers.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.reference = @reference AND t.reference <> ''
  AND (t.created_at, t.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (@wallet_id::text = '' OR @wallet_id::text IN (t.from_wallet_id, t.to_wallet_id))
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY t.created_at, t.id
LIMIT @row_limit;

-- name: ListTransfersByMetadata :many
-- The transfers whose metadata contains @metadata (every pair of it) after the cursor, oldest
-- first. The matches are found first, in a bitmap scan of transfers_metadata_idx
-- (db/schema/wallet/00014), then bounded by the cursor and the other filters and sorted: left
-- to itself, a generic plan walks transfers_created_at_idx and filters every transfer (the
-- GIN index keeps no order), which reads them all for a rare pair. A page costs what the
-- filter matches, not the number of transfers. With @wallet_id or @reference ('' for any),
-- only those from or to that wallet or of that reference; with an owner, only those the
-- owner may see, as in ListTransfers.
WITH matched AS MATERIALIZED (
    SELECT m.id, m.created_at FROM transfers m
    WHERE m.metadata @> @metadata::jsonb AND m.metadata <> '{}' -- the index's predicate: @metadata is never {}
)
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM matched m
JOIN transfers t ON t.id = m.id
LEFT JOIN outbox o ON o.id = t.event_id
WHERE (m.created_at, m.id) > (@after_created_at::timestamptz, @after_id::uuid)
  AND (@wallet_id::text = '' OR @wallet_id::text IN (t.from_wallet_id, t.to_wallet_id))
  AND (@reference::text = '' OR t.reference = @reference::text)
  AND (sqlc.narg('owner')::text IS NULL
       OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text))
ORDER BY m.created_at, m.id
LIMIT @row_limit;

-- name: TransferCursorExists :one
-- Whether a listing's cursor names a transfer the owner may see (NULL: any), at the time the
-- cursor says: one that names none was not handed out by this service.
SELECT EXISTS (
    SELECT 1 FROM transfers t
    WHERE t.id = @id AND t.created_at = @created_at
      AND (sqlc.narg('owner')::text IS NULL
           OR EXISTS (SELECT 1 FROM wallets w WHERE w.id IN (t.from_wallet_id, t.to_wallet_id) AND w.owner = sqlc.narg('owner')::text)));

-- name: GetTransfer :one
-- The transfer a reversal names, read before its wallets are locked: its wallets, amount and
-- currency never change.
SELECT * FROM transfers WHERE id = @id;

-- name: LockTransferForReversal :one
-- Every reversal of a transfer locks it after the wallets (the order all writers take), so
-- concurrent reversals of one transfer see each other's reversed_amount. NO KEY UPDATE leaves
-- the KEY SHARE lock of the reversal row's foreign key alone.
SELECT * FROM transfers WHERE id = @id FOR NO KEY UPDATE;

-- name: InsertReversal :one
-- InsertReversal claims the idempotency key as InsertTransfer does: a conflict returns no row.
INSERT INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key, reverses_transfer_id, forced, metadata)
VALUES (@id, @idempotency_owner, @idempotency_key, @request_hash, @from_wallet_id, @to_wallet_id, @amount, @currency, @event_id,
        sqlc.narg('created_by_key')::uuid, @reverses_transfer_id, @forced, @metadata)
ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING
RETURNING *;

-- name: AddReversedAmount :one
-- The check transfers_reversed_within_amount refuses a total beyond the original's amount.
UPDATE transfers SET reversed_amount = reversed_amount + @amount
WHERE id = @id
RETURNING reversed_amount;

-- name: ListReversals :many
-- The reversals of a transfer, oldest first.
SELECT sqlc.embed(t), coalesce(o.status, 'acknowledged')::text AS outbox_status
FROM transfers t
LEFT JOIN outbox o ON o.id = t.event_id
WHERE t.reverses_transfer_id = @transfer_id
ORDER BY t.created_at, t.id;

