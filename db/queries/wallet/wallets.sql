-- name: CreateWallet :one
INSERT INTO wallets (id, currency, allow_negative, owner, min_balance, max_balance)
VALUES (@id, @currency, @allow_negative, sqlc.narg('owner')::text, @min_balance, sqlc.narg('max_balance')::bigint)
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

-- name: AddForcedDebit :execrows
-- AddForcedDebit widens a wallet's allowance below its minimum (the wallets_floor CHECK) by
-- what a forced reversal takes it below.
UPDATE wallets SET forced_debit = forced_debit + @amount WHERE id = @id;

-- name: BalanceTotals :many
SELECT currency, sum(balance)::bigint AS total, count(*)::bigint AS wallets
FROM wallets
GROUP BY currency
ORDER BY currency;
