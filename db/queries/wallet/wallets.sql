-- name: CreateWallet :one
INSERT INTO wallets (id, currency, allow_negative)
VALUES (@id, @currency, @allow_negative)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: GetWallet :one
SELECT * FROM wallets WHERE id = @id;

-- name: LockWallets :many
-- LockWallets takes both wallets of a transfer in one fixed order (by id), so two transfers in
-- opposite directions cannot deadlock. NO KEY UPDATE does not conflict with the KEY SHARE locks
-- the transfers foreign keys take.
SELECT id, currency, balance, allow_negative
FROM wallets
WHERE id = ANY (@ids::text[])
ORDER BY id
FOR NO KEY UPDATE;

-- name: AddToBalances :execrows
UPDATE wallets w
SET balance = w.balance + d.delta, updated_at = clock_timestamp()
FROM (SELECT unnest(@ids::text[]) AS id, unnest(@deltas::bigint[]) AS delta) AS d
WHERE w.id = d.id;

-- name: BalanceTotals :many
SELECT currency, sum(balance)::bigint AS total, count(*)::bigint AS wallets
FROM wallets
GROUP BY currency
ORDER BY currency;
