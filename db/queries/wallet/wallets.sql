-- name: CreateWallet :one
INSERT INTO wallets (id, currency, allow_negative, owner, min_balance, max_balance, metadata)
VALUES (@id, @currency, @allow_negative, sqlc.narg('owner')::text, @min_balance, sqlc.narg('max_balance')::bigint, @metadata)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: GetWallet :one
-- With an owner, only the owner's wallet is found.
SELECT * FROM wallets
WHERE id = @id AND (sqlc.narg('owner')::text IS NULL OR owner = sqlc.narg('owner')::text);

-- name: LockWallets :many
-- LockWallets takes the wallets of a transfer, or of a whole batch of transfers, in one
-- statement and one fixed order (by id), so two transactions cannot deadlock on them. NO KEY UPDATE does not conflict with the KEY SHARE locks
-- the transfers foreign keys take.
SELECT id, currency, balance, held, allow_negative, owner, min_balance, max_balance, forced_debit
FROM wallets
WHERE id = ANY (@ids::text[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: AddToBalances :execrows
-- AddToBalances adds each delta to its wallet; a wallet may appear several times (a batch of
-- transfers), so the deltas are summed per wallet first: an UPDATE … FROM applies only one
-- joined row to each target row. It returns how many wallets changed.
UPDATE wallets w
SET balance = w.balance + d.delta, updated_at = clock_timestamp()
FROM (SELECT u.id, sum(u.delta)::bigint AS delta
      FROM (SELECT unnest(@ids::text[]) AS id, unnest(@deltas::bigint[]) AS delta) AS u
      GROUP BY u.id) AS d
WHERE w.id = d.id;

-- name: LockWallet :one
-- LockWallet takes one wallet, as LockWallets does, to change its limits; with an owner, only
-- the owner's wallet is found.
SELECT * FROM wallets
WHERE id = @id AND (sqlc.narg('owner')::text IS NULL OR owner = sqlc.narg('owner')::text)
FOR NO KEY UPDATE;

-- name: SetWalletLimits :one
UPDATE wallets
SET min_balance = @min_balance, max_balance = sqlc.narg('max_balance')::bigint, updated_at = clock_timestamp()
WHERE id = @id
RETURNING *;

-- name: SetWalletMetadata :one
UPDATE wallets
SET metadata = @metadata, updated_at = clock_timestamp()
WHERE id = @id
RETURNING *;

-- name: ListWallets :many
-- The wallets before the cursor, newest first (wallets_created_at_idx, walked backwards); with
-- an owner, only the owner's. A NULL cursor is the start of the list.
SELECT * FROM wallets w
WHERE (w.created_at, w.id) < (coalesce(sqlc.narg('before_created_at')::timestamptz, 'infinity'), coalesce(sqlc.narg('before_id')::text, ''))
  AND (sqlc.narg('owner')::text IS NULL OR w.owner = sqlc.narg('owner')::text)
ORDER BY w.created_at DESC, w.id DESC
LIMIT @row_limit;

-- name: ListWalletsByMetadata :many
-- ListWallets of the wallets whose metadata contains @metadata (every pair of it). The matches
-- are found first, in a bitmap scan of wallets_metadata_idx (db/schema/wallet/00015), then
-- bounded by the cursor and sorted: left to itself, a generic plan walks
-- wallets_created_at_idx and filters every wallet (the GIN index keeps no order). A page
-- costs what the filter matches, not the number of wallets.
WITH matched AS MATERIALIZED (
    SELECT m.id, m.created_at FROM wallets m
    WHERE m.metadata @> @metadata::jsonb AND m.metadata <> '{}' -- the index's predicate: @metadata is never {}
)
SELECT w.* FROM matched m
JOIN wallets w ON w.id = m.id
WHERE (m.created_at, m.id) < (coalesce(sqlc.narg('before_created_at')::timestamptz, 'infinity'), coalesce(sqlc.narg('before_id')::text, ''))
  AND (sqlc.narg('owner')::text IS NULL OR w.owner = sqlc.narg('owner')::text)
ORDER BY m.created_at DESC, m.id DESC
LIMIT @row_limit;

-- name: WalletCursorExists :one
-- Whether a listing's cursor names a wallet the owner may see (NULL: any), at the time the
-- cursor says: one that names none was not handed out by this service.
SELECT EXISTS (
    SELECT 1 FROM wallets w
    WHERE w.id = @id AND w.created_at = @created_at
      AND (sqlc.narg('owner')::text IS NULL OR w.owner = sqlc.narg('owner')::text));

-- name: AddForcedDebit :execrows
-- AddForcedDebit widens a wallet's allowance below its minimum (the wallets_floor CHECK) by
-- what a forced reversal takes it below.
UPDATE wallets SET forced_debit = forced_debit + @amount WHERE id = @id;

-- name: BalanceTotals :many
SELECT currency, sum(balance)::bigint AS total, count(*)::bigint AS wallets
FROM wallets
GROUP BY currency
ORDER BY currency;
