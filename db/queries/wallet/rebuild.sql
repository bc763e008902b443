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
