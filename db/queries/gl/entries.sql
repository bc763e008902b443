-- name: InsertEntry :one
-- The second guard below the inbox: one entry per event and per transfer. A conflict returns no
-- row, and the caller logs that the transfer already has its posting.
INSERT INTO journal_entries (id, event_id, transfer_id, currency, description, occurred_at)
VALUES (@id, @event_id, @transfer_id, @currency, @description, @occurred_at)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: InsertLines :exec
INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at)
SELECT @entry_id, l.account_code, l.direction, l.amount, @currency, @posted_at
FROM (SELECT unnest(@account_codes::text[]) AS account_code, unnest(@directions::text[]) AS direction,
             unnest(@amounts::bigint[]) AS amount) AS l;

-- name: GetEntryByTransfer :one
SELECT * FROM journal_entries WHERE transfer_id = @transfer_id;

-- name: ListEntriesByTransfer :many
SELECT * FROM journal_entries WHERE transfer_id = @transfer_id ORDER BY posted_at, id;

-- name: ListLinesByEntries :many
SELECT * FROM journal_lines WHERE entry_id = ANY (@entry_ids::uuid[]) ORDER BY entry_id, id;

-- name: AccountBalance :one
-- Starts from the chart of accounts so that an unknown code returns no row (not found) while a
-- known account without lines in this currency returns zeros.
SELECT
    a.code                                                                    AS account_code,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::bigint  AS debits,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::bigint AS credits
FROM accounts a
LEFT JOIN journal_lines l ON l.account_code = a.code AND l.currency = @currency
WHERE a.code = @account_code
GROUP BY a.code;

-- name: TrialBalance :many
SELECT
    account_code,
    currency,
    coalesce(sum(amount) FILTER (WHERE direction = 'debit'), 0)::bigint  AS debits,
    coalesce(sum(amount) FILTER (WHERE direction = 'credit'), 0)::bigint AS credits
FROM journal_lines
GROUP BY account_code, currency
ORDER BY currency, account_code;

-- name: GetAccount :one
SELECT * FROM accounts WHERE code = @code;
