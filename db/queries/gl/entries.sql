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
-- The entry whose key is @transfer_id, or the batch entry with a leg tagged @transfer_id (a
-- batch's leg, or a batch reversal's leg reversal: db/schema/gl/00018).
SELECT e.* FROM journal_entries e
WHERE e.transfer_id = @transfer_id
   OR e.id IN (SELECT l.entry_id FROM journal_lines l WHERE l.transfer_id = @transfer_id::text)
ORDER BY e.posted_at, e.id;

-- name: ListEntriesByEvent :many
SELECT * FROM journal_entries WHERE event_id = @event_id ORDER BY posted_at, id;

-- name: ListEntriesPosted :many
-- A page of entries posted in [posted_from, posted_before), each bound optional, in posting
-- order after the entry named by after_id (the cursor; NULL for the first page); a cursor that
-- names no entry gives an empty page. The page starts after the later of the cursor and
-- (posted_from, the nil UUID, which no entry has), one row comparison: the index scan on
-- (posted_at, id) starts there in any plan, where a scalar bound beside a row comparison would
-- leave it starting at the index's first entry (00010). A missing bound is an infinity.
WITH cursor_entry AS (
    SELECT c.posted_at, c.id FROM journal_entries c WHERE c.id = sqlc.narg('after_id')::uuid
), start AS (
    SELECT b.posted_at, b.id FROM (
        SELECT coalesce(sqlc.narg('posted_from')::timestamptz, '-infinity') AS posted_at, '00000000-0000-0000-0000-000000000000'::uuid AS id
        UNION ALL
        SELECT posted_at, id FROM cursor_entry
    ) b
    WHERE sqlc.narg('after_id')::uuid IS NULL OR EXISTS (SELECT FROM cursor_entry)
    ORDER BY b.posted_at DESC, b.id DESC
    LIMIT 1
)
SELECT e.* FROM journal_entries e
WHERE (e.posted_at, e.id) > (SELECT posted_at, id FROM start)
  AND e.posted_at < coalesce(sqlc.narg('posted_before')::timestamptz, 'infinity')
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: ListEntriesByMetadata :many
-- ListEntriesPosted of the entries whose metadata contains @metadata (every pair of it). The
-- matches are found first, in a bitmap scan of journal_entries_metadata_idx (db/schema/gl/00016),
-- then bounded by the range and the cursor and sorted: left to itself, a generic plan walks
-- posting order and filters every entry (the GIN index keeps no order), which reads the whole
-- ledger for a rare pair, or ANDs the bitmap with the whole range of journal_entries_posted_at_idx.
-- A page costs what the filter matches, not the ledger's size.
WITH cursor_entry AS (
    SELECT c.posted_at, c.id FROM journal_entries c WHERE c.id = sqlc.narg('after_id')::uuid
), start AS (
    SELECT b.posted_at, b.id FROM (
        SELECT coalesce(sqlc.narg('posted_from')::timestamptz, '-infinity') AS posted_at, '00000000-0000-0000-0000-000000000000'::uuid AS id
        UNION ALL
        SELECT posted_at, id FROM cursor_entry
    ) b
    WHERE sqlc.narg('after_id')::uuid IS NULL OR EXISTS (SELECT FROM cursor_entry)
    ORDER BY b.posted_at DESC, b.id DESC
    LIMIT 1
), matched AS MATERIALIZED (
    SELECT m.id, m.posted_at FROM journal_entries m
    WHERE m.metadata @> @metadata::jsonb AND m.metadata <> '{}' -- the index's predicate: @metadata is never {}
)
SELECT e.* FROM matched m
JOIN journal_entries e ON e.id = m.id
WHERE (m.posted_at, m.id) > (SELECT posted_at, id FROM start)
  AND m.posted_at < coalesce(sqlc.narg('posted_before')::timestamptz, 'infinity')
ORDER BY m.posted_at, m.id
LIMIT @row_limit;

-- name: ListLinesByEntries :many
-- Each line with whether a later line reverses it (reverses_line_id, a batch reversal's).
SELECT l.*, EXISTS (SELECT FROM journal_lines r WHERE r.reverses_line_id = l.id) AS reversed
FROM journal_lines l WHERE l.entry_id = ANY (@entry_ids::uuid[]) ORDER BY l.entry_id, l.id;

-- name: AccountBalance :one
-- Starts from the chart of accounts so that an unknown code returns no row (not found) while a
-- known account without lines in this currency returns zeros. With as_of, only lines posted at
-- or before it count: the balance as the ledger stood then. The account's latest balance
-- checkpoint row at or before as_of (db/schema/gl/00004, found in one descent of the index of
-- 00010) gives its totals up to that row's time; the covering index on (account_code,
-- currency, posted_at, id) adds the lines after it with an index-only range scan, so the cost
-- does not grow with the ledger. A NULL bound is written as an infinity, never as
-- `$1 IS NULL OR …`, so that both scans are bounded in a generic plan too (00010).
-- The sums stay numeric, what sum(bigint) returns, and are never cast back to bigint: lines
-- are append-only, so a total beyond int64 would fail the report for good. The same holds for
-- every sum over lines below; the ledger reads them into gl.Sum.
WITH base AS (
    SELECT b.through, b.debits, b.credits FROM balance_checkpoints b
    WHERE b.account_code = @account_code AND b.currency = @currency
      AND b.through <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity')
    ORDER BY b.through DESC
    LIMIT 1
)
SELECT
    a.code                                                                                                     AS account_code,
    a.normal_balance,
    (coalesce((SELECT debits FROM base), 0) + coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0))::numeric   AS debits,
    (coalesce((SELECT credits FROM base), 0) + coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0))::numeric AS credits
FROM accounts a
LEFT JOIN journal_lines l ON l.account_code = a.code AND l.currency = @currency
    AND l.posted_at > coalesce((SELECT through FROM base), '-infinity')
    AND l.posted_at <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity')
WHERE a.code = @account_code
GROUP BY a.code, a.normal_balance;

-- name: AccountStatement :many
-- One page of an account's lines in one currency posted in [posted_from, posted_before), each
-- bound optional, in posting order after the line named by after_id (the cursor; NULL for the
-- first page). running_balance is in the account's normal balance sign (@normal_balance): the
-- opening balance up to where the page starts plus the page's lines. The page starts after
-- the later of the cursor and (posted_from, 0), which no line is (ids start at 1), or
-- (-infinity, 0): one row comparison, a bound of the index scan in any plan (00010); a cursor
-- that names no line of this account and currency gives an empty page. The opening balance is
-- the account's latest checkpoint row before the start's posting time plus the lines after it
-- up to the start. A missing bound is an infinity.
WITH cursor_line AS (
    SELECT c.posted_at, c.id FROM journal_lines c
    WHERE c.id = sqlc.narg('after_id')::bigint AND c.account_code = @account_code AND c.currency = @currency
), start AS (
    SELECT s.posted_at, s.id FROM (
        SELECT coalesce(sqlc.narg('posted_from')::timestamptz, '-infinity') AS posted_at, 0::bigint AS id
        UNION ALL
        SELECT posted_at, id FROM cursor_line
    ) s
    WHERE sqlc.narg('after_id')::bigint IS NULL OR EXISTS (SELECT FROM cursor_line)
    ORDER BY s.posted_at DESC, s.id DESC
    LIMIT 1
), page AS (
    SELECT l.id, l.entry_id, l.direction, l.amount, l.posted_at
    FROM journal_lines l
    WHERE l.account_code = @account_code AND l.currency = @currency
      AND (l.posted_at, l.id) > (SELECT posted_at, id FROM start)
      AND l.posted_at < coalesce(sqlc.narg('posted_before')::timestamptz, 'infinity')
    ORDER BY l.posted_at, l.id
    LIMIT @row_limit
), base AS (
    SELECT b.through, CASE WHEN @normal_balance::text = 'debit' THEN b.debits - b.credits ELSE b.credits - b.debits END AS amount
    FROM balance_checkpoints b
    WHERE b.account_code = @account_code AND b.currency = @currency AND b.through < (SELECT posted_at FROM start)
    ORDER BY b.through DESC
    LIMIT 1
), opening AS (
    SELECT coalesce((SELECT amount FROM base), 0)
         + coalesce(sum(CASE WHEN o.direction = @normal_balance::text THEN o.amount ELSE -o.amount END), 0)::numeric AS amount
    FROM journal_lines o
    WHERE o.account_code = @account_code AND o.currency = @currency
      AND o.posted_at > coalesce((SELECT through FROM base), '-infinity')
      AND (o.posted_at, o.id) <= (SELECT posted_at, id FROM start)
)
SELECT
    p.id AS line_id, p.entry_id, e.event_id, e.transfer_id, e.kind, p.direction, p.amount, p.posted_at,
    ((SELECT amount FROM opening) + sum(CASE WHEN p.direction = @normal_balance::text THEN p.amount ELSE -p.amount END)
        OVER (ORDER BY p.posted_at, p.id))::numeric AS running_balance
FROM page p
JOIN journal_entries e ON e.id = p.entry_id
ORDER BY p.posted_at, p.id;

-- name: StatementLineExists :one
-- Whether a statement's cursor names a line of this account and currency (and of the wallet
-- @wallet_id, '' for any): an empty page after one that does not is an invalid cursor, not the
-- end of the statement.
SELECT EXISTS (SELECT FROM journal_lines WHERE id = @id AND account_code = @account_code AND currency = @currency
               AND (@wallet_id::text = '' OR wallet_id = @wallet_id::text));

-- name: EntryExists :one
-- Whether a page's cursor names an entry: an empty page after one that does not is an invalid
-- cursor, not the end of the listing.
SELECT EXISTS (SELECT FROM journal_entries WHERE id = @id);

-- name: TrialBalance :many
-- Every account's totals per currency, with its normal balance (the side its balance is
-- positive on), over the lines posted at or before @as_of (NULL: every
-- line so far): the latest balance checkpoint at or before it plus the lines posted after that
-- checkpoint and at or before @as_of (through the index on posted_at), independent of the
-- ledger's size. The lines' bound is a range on posted_at, from the checkpoint's through (a
-- scalar subquery: a parameter of the scan, not a join with a CTE) to an explicit upper bound
-- (@as_of, or infinity). The planner cannot know the checkpoint's value, and rates a range of
-- two bounds it cannot see at 0.5 % of the rows whatever its statistics, so it descends the
-- index even before the first ANALYZE; a lower bound alone it rates at a third of the table,
-- and right after a bulk load it read every line instead.
WITH totals AS (
    SELECT b.account_code, b.currency, b.debits, b.credits FROM balance_checkpoints b
    WHERE b.through = (SELECT max(c.through) FROM balance_checkpoints c
                       WHERE c.through <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity'))
    UNION ALL
    SELECT l.account_code, l.currency,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::numeric,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::numeric
    FROM journal_lines l
    WHERE l.posted_at > (SELECT coalesce(max(c.through), '-infinity'::timestamptz) FROM balance_checkpoints c
                         WHERE c.through <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity'))
      AND l.posted_at <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity')
    GROUP BY l.account_code, l.currency
)
SELECT t.account_code, t.currency, a.normal_balance, sum(t.debits)::numeric AS debits, sum(t.credits)::numeric AS credits
FROM totals t
JOIN accounts a ON a.code = t.account_code
GROUP BY t.account_code, t.currency, a.normal_balance
ORDER BY t.currency, t.account_code;

-- name: CheckpointMark :one
-- A time a balance checkpoint may cover once every transaction id below @xid has ended: the
-- clock is read first (the CTE is evaluated before the outer row), then this statement's
-- transaction gets its id. A line posted at or before @through read the clock before this
-- statement did, and its transaction had its id before it read the clock (journal_posting_time,
-- db/schema/gl/00011), so that id is below @xid. horizon is this statement's snapshot's xmin:
-- every id below it has ended, which tells the caller which earlier marks are ready. Ids are
-- the 64-bit xid8, never wrapping; text then bigint, which sqlc can type.
WITH reading AS MATERIALIZED (SELECT clock_timestamp() AS at)
SELECT (r.at - interval '1 microsecond')::timestamptz AS through,
       pg_current_xact_id()::text::bigint AS xid,
       pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon
FROM reading r;

-- name: CheckpointHorizon :one
-- The oldest transaction id still in progress in the whole server (the snapshot's xmin): every
-- id below it has ended, committed or rolled back, so a later statement's snapshot holds what
-- it committed.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS horizon;

-- name: TakeBalanceCheckpoint :execrows
-- A checkpoint at @through: the latest one's totals plus the lines posted after it up to
-- @through, for every account and currency. Run only once CheckpointMark's @through is ready
-- (CheckpointHorizon above its xid): this statement's snapshot then holds every line posted at
-- or before it that will ever commit. Taken only when it is due: at least @min_lines
-- lines were posted after the latest one, and at least @lines_per_row for each of its rows (an
-- account and currency), or the latest is at or before @stale_before (and at least one line was
-- posted since). Nothing when @through is not after the latest checkpoint (another instance
-- took a later one). The parameters are read through policy, where sqlc can type them.
WITH policy AS (
    SELECT @min_lines::bigint AS min_lines, @lines_per_row::bigint AS lines_per_row, @stale_before::timestamptz AS stale_before
), prev AS (
    SELECT coalesce(max(through), '-infinity'::timestamptz) AS through FROM balance_checkpoints
), base AS (
    SELECT b.account_code, b.currency, b.debits, b.credits FROM balance_checkpoints b, prev WHERE b.through = prev.through
), fresh AS (
    SELECT l.account_code, l.currency,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::numeric  AS debits,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::numeric AS credits,
           count(*) AS lines
    FROM journal_lines l, prev
    WHERE l.posted_at > prev.through AND l.posted_at <= @through::timestamptz
    GROUP BY l.account_code, l.currency
)
INSERT INTO balance_checkpoints (through, account_code, currency, debits, credits)
SELECT @through::timestamptz, coalesce(b.account_code, f.account_code), coalesce(b.currency, f.currency),
       coalesce(b.debits, 0) + coalesce(f.debits, 0), coalesce(b.credits, 0) + coalesce(f.credits, 0)
FROM base b FULL JOIN fresh f ON f.account_code = b.account_code AND f.currency = b.currency
WHERE EXISTS (SELECT 1 FROM fresh) AND @through::timestamptz > (SELECT through FROM prev)
  AND ((SELECT sum(lines) FROM fresh) >= (SELECT greatest(p.min_lines, p.lines_per_row * (SELECT count(*) FROM base)) FROM policy p)
       OR (SELECT through FROM prev) <= (SELECT stale_before FROM policy))
ON CONFLICT DO NOTHING;

-- name: ThinBalanceCheckpoints :execrows
-- Deletes up to @batch_rows rows of the balance checkpoints taken in [@since, @keep_after)
-- that are not the last checkpoint of their day (UTC), oldest first: a checkpoint older than
-- the retention stays only as its day's last. Any row is its account's totals up to its time,
-- so a read stays exact whichever rows are left (a read as of a time starts from an earlier
-- row and adds more lines); the latest checkpoint, which the trial balance and the next
-- checkpoint start from, is always its day's last. Small batches: each statement holds its
-- row locks for a moment, and the primary key on (through, ...) finds the rows and whether a
-- later checkpoint exists the same day.
WITH doomed AS (
    SELECT b.through, b.account_code, b.currency
    FROM balance_checkpoints b
    WHERE b.through >= @since::timestamptz AND b.through < @keep_after::timestamptz
      AND EXISTS (SELECT FROM balance_checkpoints later
                  WHERE later.through > b.through
                    AND later.through < date_trunc('day', b.through, 'UTC') + interval '1 day')
    ORDER BY b.through
    LIMIT @batch_rows
)
DELETE FROM balance_checkpoints d
USING doomed
WHERE d.through = doomed.through AND d.account_code = doomed.account_code AND d.currency = doomed.currency;

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
-- A reverses_entry_id of the zero uuid stands for none (NULL), as does a hold_id of ''.
INSERT /* fixed plan */ INTO journal_entries (id, event_id, transfer_id, currency, description, occurred_at, reverses_entry_id, hold_id, event_type, kind, metadata)
SELECT e.id, e.event_id, e.transfer_id, e.currency, e.description, e.occurred_at,
       nullif(e.reverses_entry_id, '00000000-0000-0000-0000-000000000000'::uuid), nullif(e.hold_id, ''),
       e.event_type, e.kind, e.metadata::jsonb
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@event_ids::text[]) AS event_id,
             unnest(@transfer_ids::text[]) AS transfer_id, unnest(@currencies::text[]) AS currency,
             unnest(@descriptions::text[]) AS description, unnest(@occurred_ats::timestamptz[]) AS occurred_at,
             unnest(@reverses_entry_ids::uuid[]) AS reverses_entry_id, unnest(@hold_ids::text[]) AS hold_id,
             unnest(@entry_event_types::text[]) AS event_type, unnest(@kinds::text[]) AS kind,
             unnest(@metadata::text[]) AS metadata) AS e
ON CONFLICT DO NOTHING
RETURNING *;

-- name: GetEntriesByTransfers :many
-- The entries holding these transfers' postings, each with the total of its debit lines (the
-- transfer's amount), to compare with an event that names the same transfer.
SELECT e.id, e.event_id, e.transfer_id, e.currency, e.description, e.occurred_at, e.posted_at, e.reverses_entry_id, e.hold_id,
       e.event_type, e.kind, e.metadata,
       (SELECT coalesce(sum(l.amount), 0) FROM journal_lines l
        WHERE l.entry_id = e.id AND l.direction = 'debit')::numeric AS debits
FROM journal_entries e
WHERE e.transfer_id = ANY (@transfer_ids::text[]);

-- name: InsertLinesBatch :exec
-- A wallet_id, a transfer_id (leg tag) or a leg_kind of '' stands for none (NULL), as does a
-- reverses_line_id of 0: a line on no wallet's side, of no batch leg, reversing no line.
INSERT /* fixed plan */ INTO journal_lines (entry_id, account_code, direction, amount, currency, posted_at, wallet_id, transfer_id, reverses_line_id, leg_kind)
SELECT l.entry_id, l.account_code, l.direction, l.amount, l.currency, l.posted_at, nullif(l.wallet_id, ''),
       nullif(l.transfer_id, ''), nullif(l.reverses_line_id, 0), nullif(l.leg_kind, '')
FROM (SELECT unnest(@entry_ids::uuid[]) AS entry_id, unnest(@account_codes::text[]) AS account_code,
             unnest(@directions::text[]) AS direction, unnest(@amounts::bigint[]) AS amount,
             unnest(@currencies::text[]) AS currency, unnest(@posted_ats::timestamptz[]) AS posted_at,
             unnest(@wallet_ids::text[]) AS wallet_id, unnest(@leg_ids::text[]) AS transfer_id,
             unnest(@reverses_line_ids::bigint[]) AS reverses_line_id, unnest(@leg_kinds::text[]) AS leg_kind) AS l;

-- name: GetEntryKeysByLegs :many
-- The batch entries holding these legs (lines tagged with their ids), by leg: a leg's id is no
-- entry's key, so an event naming it as one is told where it was posted.
SELECT DISTINCT l.transfer_id::text AS leg_id, e.transfer_id AS entry_key
FROM journal_lines l
JOIN journal_entries e ON e.id = l.entry_id
WHERE l.transfer_id = ANY (@leg_ids::text[]);

-- name: ListReversingEntries :many
-- The entries that reverse these entries (reverses_entry_id), to show each original's
-- reversals beside it.
SELECT id, reverses_entry_id::uuid AS reverses_entry_id
FROM journal_entries
WHERE reverses_entry_id = ANY (@entry_ids::uuid[])
ORDER BY posted_at, id;

-- name: WalletAccountBalance :one
-- AccountBalance of one wallet's sub-account: the wallet's lines on the account in one
-- currency, posted at or before as_of (an infinity when absent). Balance checkpoints are per
-- account, not per wallet, so this sums the wallet's lines through journal_lines_wallet_idx
-- (00014): its cost grows with the wallet's lines on the account, not with the ledger.
SELECT
    a.code AS account_code,
    a.normal_balance,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::numeric  AS debits,
    coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::numeric AS credits
FROM accounts a
LEFT JOIN journal_lines l ON l.wallet_id = @wallet_id::text AND l.account_code = a.code AND l.currency = @currency
    AND l.posted_at <= coalesce(sqlc.narg('as_of')::timestamptz, 'infinity')
WHERE a.code = @account_code
GROUP BY a.code, a.normal_balance;

-- name: WalletAccountStatement :many
-- AccountStatement of one wallet's sub-account: the wallet's lines on the account in one
-- currency posted in [posted_from, posted_before), each bound optional, in posting order after
-- the cursor line (which must be one of them), with running balances from the wallet's first
-- line on it. The page starts after the later of the cursor and (posted_from, 0), as in
-- AccountStatement.
WITH cursor_line AS (
    SELECT c.posted_at, c.id FROM journal_lines c
    WHERE c.id = sqlc.narg('after_id')::bigint AND c.wallet_id = @wallet_id::text
      AND c.account_code = @account_code AND c.currency = @currency
), start AS (
    SELECT s.posted_at, s.id FROM (
        SELECT coalesce(sqlc.narg('posted_from')::timestamptz, '-infinity') AS posted_at, 0::bigint AS id
        UNION ALL
        SELECT posted_at, id FROM cursor_line
    ) s
    WHERE sqlc.narg('after_id')::bigint IS NULL OR EXISTS (SELECT FROM cursor_line)
    ORDER BY s.posted_at DESC, s.id DESC
    LIMIT 1
), page AS (
    SELECT l.id, l.entry_id, l.direction, l.amount, l.posted_at
    FROM journal_lines l
    WHERE l.wallet_id = @wallet_id::text AND l.account_code = @account_code AND l.currency = @currency
      AND (l.posted_at, l.id) > (SELECT posted_at, id FROM start)
      AND l.posted_at < coalesce(sqlc.narg('posted_before')::timestamptz, 'infinity')
    ORDER BY l.posted_at, l.id
    LIMIT @row_limit
), opening AS (
    SELECT coalesce(sum(CASE WHEN o.direction = @normal_balance::text THEN o.amount ELSE -o.amount END), 0)::numeric AS amount
    FROM journal_lines o
    WHERE o.wallet_id = @wallet_id AND o.account_code = @account_code AND o.currency = @currency
      AND (o.posted_at, o.id) <= (SELECT posted_at, id FROM start)
)
SELECT
    p.id AS line_id, p.entry_id, e.event_id, e.transfer_id, e.kind, p.direction, p.amount, p.posted_at,
    ((SELECT amount FROM opening) + sum(CASE WHEN p.direction = @normal_balance::text THEN p.amount ELSE -p.amount END)
        OVER (ORDER BY p.posted_at, p.id))::numeric AS running_balance
FROM page p
JOIN journal_entries e ON e.id = p.entry_id
ORDER BY p.posted_at, p.id;

-- name: WalletSubLedgers :many
-- Every wallet's sub-account of every control account of wallets, per currency, in the
-- account's normal-balance sign; lines without a wallet under wallet_id ''. gl reconcile reads
-- it in a REPEATABLE READ snapshot with PostedMovements.
SELECT l.account_code, coalesce(l.wallet_id, '')::text AS wallet_id, l.currency,
       sum(CASE WHEN l.direction = a.normal_balance THEN l.amount ELSE -l.amount END)::numeric AS balance
FROM journal_lines l
JOIN accounts a ON a.code = l.account_code
WHERE a.wallet_control
GROUP BY l.account_code, l.wallet_id, l.currency
ORDER BY 2, 3, 1;

-- name: PostedMovements :many
-- Which of these movement keys (transfer, reversal or hold movement ids) have an entry.
SELECT transfer_id FROM journal_entries WHERE transfer_id = ANY (@transfer_ids::text[]);

-- name: WalletsOnControlAccountsOfCustomers :many
-- The wallets of @wallet_ids that a line of a wallet control account names in an entry of a
-- transfer or a withdrawal (a reversal of one included), or of a batch (its legs' kinds are
-- v2's, so its control-account lines name customers whatever the leg): there the control
-- account's lines name only customers' wallets, which may not go negative. Each wallet is an index seek on
-- (wallet_id, account_code) per control account, and stops at its first such line.
SELECT w.id::text AS wallet_id
FROM unnest(@wallet_ids::text[]) AS w(id)
WHERE EXISTS (
    SELECT FROM accounts a
    JOIN journal_lines l ON l.wallet_id = w.id AND l.account_code = a.code
    JOIN journal_entries e ON e.id = l.entry_id
    WHERE a.wallet_control AND e.kind IN ('transfer', 'withdrawal', 'batch'));

-- name: WalletsOnOtherAccounts :many
-- The wallets of @wallet_ids that a line of an account that is not a wallet control account
-- names: the external side of a movement (where a deposit's money came from, where a
-- withdrawal's went). An index seek per account, stopping at the first line.
SELECT w.id::text AS wallet_id
FROM unnest(@wallet_ids::text[]) AS w(id)
WHERE EXISTS (
    SELECT FROM accounts a
    JOIN journal_lines l ON l.wallet_id = w.id AND l.account_code = a.code
    WHERE NOT a.wallet_control);
