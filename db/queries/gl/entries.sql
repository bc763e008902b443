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

-- name: ListEntriesByEvent :many
SELECT * FROM journal_entries WHERE event_id = @event_id ORDER BY posted_at, id;

-- name: ListEntriesPosted :many
-- A page of entries posted in [posted_from, posted_before), each bound optional, in posting
-- order after the entry named by after_id (the cursor; NULL for the first page).
SELECT e.* FROM journal_entries e
WHERE (sqlc.narg('posted_from')::timestamptz IS NULL OR e.posted_at >= sqlc.narg('posted_from')::timestamptz)
  AND (sqlc.narg('posted_before')::timestamptz IS NULL OR e.posted_at < sqlc.narg('posted_before')::timestamptz)
  AND (sqlc.narg('after_id')::uuid IS NULL
       OR (e.posted_at, e.id) > (SELECT c.posted_at, c.id FROM journal_entries c WHERE c.id = sqlc.narg('after_id')::uuid))
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: ListLinesByEntries :many
SELECT * FROM journal_lines WHERE entry_id = ANY (@entry_ids::uuid[]) ORDER BY entry_id, id;

-- name: AccountBalance :one
-- Starts from the chart of accounts so that an unknown code returns no row (not found) while a
-- known account without lines in this currency returns zeros. With as_of, only lines posted at
-- or before it count: the balance as the ledger stood then. The covering index on
-- (account_code, currency, posted_at, id) makes both an index-only range scan.
-- The sums stay numeric, what sum(bigint) returns, and are never cast back to bigint: lines
-- are append-only, so a total beyond int64 would fail the report for good. The same holds for
-- every sum over lines below; the ledger reads them into gl.Sum.
SELECT
    a.code                                                                     AS account_code,
    a.normal_balance,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::numeric  AS debits,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::numeric AS credits
FROM accounts a
LEFT JOIN journal_lines l ON l.account_code = a.code AND l.currency = @currency
    AND (sqlc.narg('as_of')::timestamptz IS NULL OR l.posted_at <= sqlc.narg('as_of')::timestamptz)
WHERE a.code = @account_code
GROUP BY a.code, a.normal_balance;

-- name: AccountStatement :many
-- One page of an account's lines in one currency, in posting order, after the line named by
-- after_id (the cursor; NULL for the first page). running_balance is in the account's normal
-- balance sign (@normal_balance): the opening balance up to the cursor plus the page's lines.
WITH cursor_line AS (
    SELECT c.posted_at, c.id FROM journal_lines c
    WHERE c.id = sqlc.narg('after_id')::bigint AND c.account_code = @account_code AND c.currency = @currency
), page AS (
    SELECT l.id, l.entry_id, l.direction, l.amount, l.posted_at
    FROM journal_lines l
    WHERE l.account_code = @account_code AND l.currency = @currency
      AND (sqlc.narg('after_id')::bigint IS NULL OR (l.posted_at, l.id) > (SELECT posted_at, id FROM cursor_line))
    ORDER BY l.posted_at, l.id
    LIMIT @row_limit
), opening AS (
    SELECT coalesce(sum(CASE WHEN o.direction = @normal_balance::text THEN o.amount ELSE -o.amount END), 0)::numeric AS amount
    FROM journal_lines o
    WHERE o.account_code = @account_code AND o.currency = @currency
      AND (o.posted_at, o.id) <= (SELECT posted_at, id FROM cursor_line)
)
SELECT
    p.id AS line_id, p.entry_id, e.event_id, e.transfer_id, p.direction, p.amount, p.posted_at,
    ((SELECT amount FROM opening) + sum(CASE WHEN p.direction = @normal_balance::text THEN p.amount ELSE -p.amount END)
        OVER (ORDER BY p.posted_at, p.id))::numeric AS running_balance
FROM page p
JOIN journal_entries e ON e.id = p.entry_id
ORDER BY p.posted_at, p.id;

-- name: TrialBalance :many
SELECT
    account_code,
    currency,
    coalesce(sum(amount) FILTER (WHERE direction = 'debit'), 0)::numeric  AS debits,
    coalesce(sum(amount) FILTER (WHERE direction = 'credit'), 0)::numeric AS credits
FROM journal_lines
GROUP BY account_code, currency
ORDER BY currency, account_code;

-- name: GetAccount :one
SELECT * FROM accounts WHERE code = @code;

-- name: ListAccounts :many
SELECT * FROM accounts ORDER BY code;

-- name: InsertAccount :one
-- A code already in the chart returns no row: accounts are never silently redefined.
INSERT INTO accounts (code, name, type, normal_balance)
VALUES (@code, @name, @type, @normal_balance)
ON CONFLICT (code) DO NOTHING
RETURNING *;

-- name: InsertEntriesBatch :many
-- InsertEntry for a whole batch; rows that conflict (event or transfer already posted, also
-- earlier in the same batch) are skipped and missing from the result.
INSERT INTO journal_entries (id, event_id, transfer_id, currency, description, occurred_at)
SELECT e.id, e.event_id, e.transfer_id, e.currency, e.description, e.occurred_at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@event_ids::text[]) AS event_id,
             unnest(@transfer_ids::text[]) AS transfer_id, unnest(@currencies::text[]) AS currency,
             unnest(@descriptions::text[]) AS description, unnest(@occurred_ats::timestamptz[]) AS occurred_at) AS e
ON CONFLICT DO NOTHING
RETURNING *;

-- name: GetEntriesByTransfers :many
-- The entries holding these transfers' postings, each with the total of its debit lines (the
-- transfer's amount), to compare with an event that names the same transfer.
SELECT e.id, e.event_id, e.transfer_id, e.currency, e.description, e.occurred_at, e.posted_at,
       (SELECT coalesce(sum(l.amount), 0) FROM journal_lines l
        WHERE l.entry_id = e.id AND l.direction = 'debit')::numeric AS debits
FROM journal_entries e
WHERE e.transfer_id = ANY (@transfer_ids::text[]);

-- name: InsertLinesBatch :exec
INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at)
SELECT l.entry_id, l.account_code, l.direction, l.amount, l.currency, l.posted_at
FROM (SELECT unnest(@entry_ids::uuid[]) AS entry_id, unnest(@account_codes::text[]) AS account_code,
             unnest(@directions::text[]) AS direction, unnest(@amounts::bigint[]) AS amount,
             unnest(@currencies::text[]) AS currency, unnest(@posted_ats::timestamptz[]) AS posted_at) AS l;
