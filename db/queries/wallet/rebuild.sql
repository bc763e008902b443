-- The reads of an operator's rebuild of the wallet's events (wallet outbox rebuild): the
-- movements of a period, paged by event id, which is the order the relay claims outbox rows in.
-- Each reads at most row_limit rows with an event id after after_event_id, through the unique
-- index of that id; the period filters them.

-- name: RebuildTransfers :many
-- Transfers, captures and reversals whose created_at is in [since, until) (until NULL: no
-- upper bound), with their wallets' allow_negative flags, which make a transfer's kind (they
-- never change).
SELECT sqlc.embed(t), f.allow_negative AS from_allow_negative, w.allow_negative AS to_allow_negative
FROM transfers t
JOIN wallets f ON f.id = t.from_wallet_id
JOIN wallets w ON w.id = t.to_wallet_id
WHERE t.event_id > @after_event_id::uuid
  AND t.batch_id IS NULL AND t.batch_reversal_id IS NULL -- a batch's rows have its event (RebuildBatches)
  AND t.created_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR t.created_at < sqlc.narg('until')::timestamptz)
ORDER BY t.event_id
LIMIT @row_limit;

-- name: RebuildHoldsPlaced :many
-- Holds placed in [since, until).
SELECT * FROM holds h
WHERE h.placed_event_id > @after_event_id::uuid
  AND h.created_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR h.created_at < sqlc.narg('until')::timestamptz)
ORDER BY h.placed_event_id
LIMIT @row_limit;

-- name: RebuildHoldsFinished :many
-- Holds captured or voided in [since, until), a capture with its transfer's receiver and amount.
SELECT sqlc.embed(h), coalesce(t.to_wallet_id, '')::text AS to_wallet_id, coalesce(t.amount, 0)::bigint AS transfer_amount
FROM holds h
LEFT JOIN transfers t ON t.id = h.capture_transfer_id
WHERE h.finished_event_id > @after_event_id::uuid
  AND h.finished_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR h.finished_at < sqlc.narg('until')::timestamptz)
ORDER BY h.finished_event_id
LIMIT @row_limit;

-- name: RebuildBatches :many
-- Transfer batches created in [since, until).
SELECT * FROM transfer_batches b
WHERE b.event_id > @after_event_id::uuid
  AND b.created_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR b.created_at < sqlc.narg('until')::timestamptz)
ORDER BY b.event_id
LIMIT @row_limit;

-- name: RebuildBatchLegs :many
-- The legs of the batches @batch_ids, each batch's in order, with their wallets'
-- allow_negative flags, which make a leg's kind.
SELECT sqlc.embed(t), f.allow_negative AS from_allow_negative, w.allow_negative AS to_allow_negative
FROM transfers t
JOIN wallets f ON f.id = t.from_wallet_id
JOIN wallets w ON w.id = t.to_wallet_id
WHERE t.batch_id = ANY (@batch_ids::uuid[])
ORDER BY t.batch_id, t.batch_leg;

-- name: RebuildBatchReversals :many
-- Batch reversals made in [since, until).
SELECT * FROM batch_reversals r
WHERE r.event_id > @after_event_id::uuid
  AND r.created_at >= @since::timestamptz
  AND (sqlc.narg('until')::timestamptz IS NULL OR r.created_at < sqlc.narg('until')::timestamptz)
ORDER BY r.event_id
LIMIT @row_limit;

-- name: RebuildBatchReversalLegs :many
-- The reversals the batch reversals @ids made, each one's in its legs' order.
SELECT t.*
FROM transfers t
JOIN transfers l ON l.id = t.reverses_transfer_id
WHERE t.batch_reversal_id = ANY (@ids::uuid[])
ORDER BY t.batch_reversal_id, l.batch_leg;
