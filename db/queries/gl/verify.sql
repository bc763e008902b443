-- The checks of `gl verify`. Each returns at most row_limit offending rows, each carrying the
-- total number of offenders (count(*) OVER () is computed before the LIMIT).

-- name: CountLedger :one
SELECT
    (SELECT count(*) FROM journal_entries)::bigint                              AS entries,
    (SELECT count(*) FROM journal_lines)::bigint                                AS lines,
    (SELECT count(*) FROM journal_entries WHERE kind = 'adjustment')::bigint AS adjustment_entries;

-- name: UnbalancedEntries :many
-- The deferred trigger makes this impossible to commit; verify still looks, because a trigger
-- can be disabled by the tables' owner. The sums are compared as numeric, so that a check
-- never fails on totals beyond int64.
-- An entry balances in each currency of its lines; its lines are in its own currency unless it
-- is a multi-currency entry (currency 'XXX', db/schema/gl/00018).
WITH per_currency AS (
    SELECT e.id, e.posted_at, e.currency AS entry_currency, l.currency, count(l.id) AS lines,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0) AS debits,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0) AS credits
    FROM journal_entries e
    LEFT JOIN journal_lines l ON l.entry_id = e.id
    GROUP BY e.id, e.posted_at, e.currency, l.currency
)
SELECT p.id, count(*) OVER ()::bigint AS total
FROM per_currency p
GROUP BY p.id, p.posted_at
HAVING sum(p.lines) < 2
    OR bool_or(p.debits <> p.credits)
    OR bool_or(p.lines > 0 AND p.currency <> p.entry_currency AND p.entry_currency <> 'XXX')
ORDER BY p.posted_at, p.id
LIMIT @row_limit;

-- name: CountBatchEntries :one
SELECT count(*)::bigint FROM journal_entries WHERE event_type IN ('TransferBatchCompleted.v1', 'TransferBatchReversed.v1');

-- name: BatchEntriesOffLegs :many
-- A batch entry (or a batch reversal's) with a line without its leg tag, or a batch entry
-- whose legs are not each the two lines the TransferCompleted.v2 rule of the leg's kind in
-- force at its time and in the leg's currency makes (one debit on its debit account, one
-- credit on its credit account, of one amount). A leg posted before leg kinds were kept
-- (leg_kind NULL on both lines) may match any kind's rule.
SELECT e.id, count(*) OVER ()::bigint AS total
FROM journal_entries e
WHERE e.event_type IN ('TransferBatchCompleted.v1', 'TransferBatchReversed.v1')
  AND (EXISTS (SELECT FROM journal_lines l WHERE l.entry_id = e.id AND l.transfer_id IS NULL)
       OR (e.event_type = 'TransferBatchCompleted.v1' AND EXISTS (
           SELECT FROM (
               SELECT l.transfer_id, min(l.currency) AS currency, count(*) AS lines,
                      count(DISTINCT l.currency) AS currencies,
                      min(l.leg_kind) AS leg_kind,
                      count(DISTINCT coalesce(l.leg_kind, '')) AS leg_kinds,
                      min(l.account_code) FILTER (WHERE l.direction = 'debit') AS debit_account,
                      min(l.account_code) FILTER (WHERE l.direction = 'credit') AS credit_account,
                      sum(l.amount) FILTER (WHERE l.direction = 'debit') AS debits,
                      sum(l.amount) FILTER (WHERE l.direction = 'credit') AS credits
               FROM journal_lines l WHERE l.entry_id = e.id AND l.transfer_id IS NOT NULL
               GROUP BY l.transfer_id
           ) leg
           WHERE leg.lines <> 2 OR leg.currencies <> 1 OR leg.leg_kinds <> 1 OR leg.debits IS DISTINCT FROM leg.credits
              OR NOT EXISTS (
                  SELECT FROM (
                      SELECT DISTINCT ON (r.kind) r.debit_account, r.credit_account FROM posting_rules r
                      WHERE r.event_type = 'TransferCompleted.v2' AND r.currency IN (leg.currency, '')
                        AND r.effective_from <= e.occurred_at AND (leg.leg_kind IS NULL OR r.kind = leg.leg_kind)
                      ORDER BY r.kind, r.currency = '', r.effective_from DESC
                  ) rule
                  WHERE rule.debit_account = leg.debit_account AND rule.credit_account = leg.credit_account))))
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: CountProcessedInbox :one
SELECT count(*)::bigint
FROM inbox
WHERE consumer = @consumer AND event_type = ANY (@event_types::text[]) AND status = 'processed';

-- name: ProcessedInboxWithoutEntry :many
-- An event the inbox says was handled, but no journal entry carries its id.
SELECT i.id, i.event_id, count(*) OVER ()::bigint AS total
FROM inbox i
WHERE i.consumer = @consumer AND i.event_type = ANY (@event_types::text[]) AND i.status = 'processed'
  AND NOT EXISTS (SELECT 1 FROM journal_entries e WHERE e.event_id = i.event_id)
ORDER BY i.received_at, i.id
LIMIT @row_limit;

-- name: EntriesWithoutInbox :many
-- An entry whose event the inbox never recorded as processed: written around the consumer.
-- Only entries posted in the last within_seconds (NULL: every entry): the inbox deletes the
-- rows of older events (EVENTS_INBOX_RETENTION). Adjustments are posted through the API, not
-- from an event: AdjustmentsApart checks them.
SELECT e.id, e.event_id, count(*) OVER ()::bigint AS total
FROM journal_entries e
WHERE e.kind <> 'adjustment'
  AND (sqlc.narg('within_seconds')::float8 IS NULL
       OR e.posted_at >= clock_timestamp() - make_interval(secs => sqlc.narg('within_seconds')::float8))
  AND NOT EXISTS (
    SELECT 1 FROM inbox i WHERE i.id = @consumer::text || ':' || e.event_id AND i.status = 'processed'
)
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: CountLatestCheckpoint :one
SELECT count(*)::bigint FROM balance_checkpoints
WHERE through = (SELECT max(through) FROM balance_checkpoints);

-- name: CheckpointMismatches :many
-- The latest balance checkpoint against the lines it totals, summed again in full: an account
-- and currency whose totals differ (a line written with a posting time a checkpoint already
-- covered, by hand or by another role than the GL's). Later checkpoints build on it.
WITH cp AS (
    SELECT max(through) AS through FROM balance_checkpoints
), stored AS (
    SELECT b.account_code, b.currency, b.debits, b.credits FROM balance_checkpoints b, cp WHERE b.through = cp.through
), summed AS (
    SELECT l.account_code, l.currency,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'debit'), 0)::numeric  AS debits,
           coalesce(sum(l.amount) FILTER (WHERE l.direction = 'credit'), 0)::numeric AS credits
    FROM journal_lines l, cp WHERE l.posted_at <= cp.through
    GROUP BY l.account_code, l.currency
)
SELECT (coalesce(s.account_code, m.account_code) || ' ' || coalesce(s.currency, m.currency))::text AS id,
       count(*) OVER ()::bigint AS total
FROM stored s FULL JOIN summed m ON m.account_code = s.account_code AND m.currency = s.currency
WHERE s.debits IS DISTINCT FROM m.debits OR s.credits IS DISTINCT FROM m.credits
ORDER BY 1
LIMIT @row_limit;

-- name: ReversalsBeyondOriginal :many
-- An original entry whose reversals' debits total more than its own, or a reversal entry
-- whose original is itself a reversal or in another currency.
WITH debits AS (
    SELECT l.entry_id, sum(l.amount) AS amount FROM journal_lines l WHERE l.direction = 'debit' GROUP BY l.entry_id
), bad AS (
    SELECT o.id, o.posted_at
    FROM journal_entries o
    JOIN journal_entries r ON r.reverses_entry_id = o.id
    LEFT JOIN debits rd ON rd.entry_id = r.id
    LEFT JOIN debits od ON od.entry_id = o.id
    GROUP BY o.id, o.posted_at, o.currency, o.reverses_entry_id, od.amount
    HAVING coalesce(sum(rd.amount), 0) > coalesce(od.amount, 0)
        OR bool_or(r.currency <> o.currency AND o.currency <> 'XXX')
        OR o.reverses_entry_id IS NOT NULL
)
SELECT b.id, count(*) OVER ()::bigint AS total
FROM bad b
ORDER BY b.posted_at, b.id
LIMIT @row_limit;

-- name: CountReversedEntries :one
SELECT count(DISTINCT reverses_entry_id)::bigint FROM journal_entries WHERE reverses_entry_id IS NOT NULL;

-- name: HoldReleasesWithoutPlacement :many
-- A hold's release (hold:<id>:released) without its placement (hold:<id>:placed), or in
-- another currency or amount than the placement: the consumer never posts one (ErrNotYet,
-- Conflict), so one is written around it.
WITH debits AS (
    SELECT l.entry_id, sum(l.amount) AS amount FROM journal_lines l WHERE l.direction = 'debit' GROUP BY l.entry_id
)
SELECT r.id, count(*) OVER ()::bigint AS total
FROM journal_entries r
LEFT JOIN journal_entries p ON p.transfer_id = 'hold:' || r.hold_id || ':placed'
LEFT JOIN debits rd ON rd.entry_id = r.id
LEFT JOIN debits pd ON pd.entry_id = p.id
WHERE r.hold_id IS NOT NULL AND r.transfer_id = 'hold:' || r.hold_id || ':released'
  AND (p.id IS NULL OR p.currency <> r.currency OR pd.amount IS DISTINCT FROM rd.amount)
ORDER BY r.posted_at, r.id
LIMIT @row_limit;

-- name: CountHoldReleases :one
SELECT count(*)::bigint FROM journal_entries WHERE hold_id IS NOT NULL AND transfer_id = 'hold:' || hold_id || ':released';

-- name: HoldAccountTotals :many
-- Per currency, the hold account's lowest running balance in posting order (credit-normal:
-- what was on hold after each line), its balance now, and the total of the open holds (placed,
-- not released). The lowest must never be negative and the balance must equal the open holds.
-- The lines of adjustments are left out: an adjustment on the hold account corrects the books,
-- not a hold, and gl reconcile shows it as the wallet's held amount against its sub-account.
WITH running AS (
    SELECT l.currency,
           sum(CASE WHEN l.direction = 'credit' THEN l.amount ELSE -l.amount END::numeric)
               OVER (PARTITION BY l.currency ORDER BY l.posted_at, l.id) AS balance
    FROM journal_lines l
    JOIN journal_entries e ON e.id = l.entry_id AND e.kind <> 'adjustment'
    WHERE l.account_code = @account_code
), account AS (
    SELECT r.currency, min(r.balance) AS lowest,
           (SELECT coalesce(sum(CASE WHEN l.direction = 'credit' THEN l.amount ELSE -l.amount END::numeric), 0)
            FROM journal_lines l JOIN journal_entries e ON e.id = l.entry_id AND e.kind <> 'adjustment'
            WHERE l.account_code = @account_code AND l.currency = r.currency) AS balance
    FROM running r
    GROUP BY r.currency
), open_holds AS (
    SELECT p.currency, sum(l.amount)::numeric AS amount
    FROM journal_entries p
    JOIN journal_lines l ON l.entry_id = p.id AND l.direction = 'debit'
    WHERE p.hold_id IS NOT NULL AND p.transfer_id = 'hold:' || p.hold_id || ':placed'
      AND NOT EXISTS (SELECT 1 FROM journal_entries r WHERE r.transfer_id = 'hold:' || p.hold_id || ':released')
    GROUP BY p.currency
)
SELECT coalesce(a.currency, o.currency)::text AS currency,
       coalesce(a.lowest, 0)::numeric AS lowest,
       coalesce(a.balance, 0)::numeric AS balance,
       coalesce(o.amount, 0)::numeric AS open_holds
FROM account a FULL JOIN open_holds o ON o.currency = a.currency
ORDER BY 1;

-- name: CountRuledEntries :one
SELECT count(*)::bigint FROM journal_entries
WHERE reverses_entry_id IS NULL AND kind <> 'adjustment' AND event_type <> 'TransferBatchCompleted.v1';

-- name: EntriesOffRule :many
-- Entries (not reversals, which swap their original's lines, nor adjustments, which no rule
-- posts) whose lines are not the two the
-- rule in force for their event type, kind, currency and time makes (the rule of their currency
-- when one is in force, else the any-currency rule, as gl.Rules.At): one debit on its debit
-- account and one credit on its credit account, of one amount.
SELECT e.id, count(*) OVER ()::bigint AS total
FROM journal_entries e
LEFT JOIN LATERAL (
    SELECT r.debit_account, r.credit_account FROM posting_rules r
    WHERE r.event_type = e.event_type AND r.kind = e.kind AND r.currency IN (e.currency, '')
      AND r.effective_from <= e.occurred_at
    ORDER BY r.currency = '', r.effective_from DESC LIMIT 1) r ON true
WHERE e.reverses_entry_id IS NULL AND e.kind <> 'adjustment' AND e.event_type <> 'TransferBatchCompleted.v1'
  AND (r.debit_account IS NULL OR NOT EXISTS (
        SELECT 1 FROM journal_lines d JOIN journal_lines c ON c.entry_id = d.entry_id
        WHERE d.entry_id = e.id AND d.direction = 'debit' AND c.direction = 'credit'
          AND d.account_code = r.debit_account AND c.account_code = r.credit_account
          AND d.amount = c.amount
          AND (SELECT count(*) FROM journal_lines l WHERE l.entry_id = e.id) = 2))
ORDER BY e.posted_at, e.id
LIMIT @row_limit;

-- name: WalletControlTotals :many
-- Per control account of wallets and currency, the account's balance and the sum of its
-- wallets' sub-accounts (the lines naming a wallet), both in the normal-balance sign, and how
-- many of its lines name none: the two are equal exactly when every line names its wallet.
SELECT l.account_code, l.currency,
       sum(CASE WHEN l.direction = a.normal_balance THEN l.amount ELSE -l.amount END)::numeric AS balance,
       coalesce(sum(CASE WHEN l.direction = a.normal_balance THEN l.amount ELSE -l.amount END)
                FILTER (WHERE l.wallet_id IS NOT NULL), 0)::numeric AS wallets,
       count(*) FILTER (WHERE l.wallet_id IS NULL)::bigint AS without_wallet
FROM journal_lines l
JOIN accounts a ON a.code = l.account_code
WHERE a.wallet_control
GROUP BY l.account_code, l.currency
ORDER BY l.account_code, l.currency;

-- name: CountAdjustments :one
-- The adjustment entries and the adjustments rows: what AdjustmentsApart looks at.
SELECT ((SELECT count(*) FROM journal_entries WHERE kind = 'adjustment')
      + (SELECT count(*) FROM adjustments))::bigint;

-- name: AdjustmentsApart :many
-- An adjustment entry without its adjustments row (the row naming the entry, whose id is the
-- entry's key adjustment:<id>), or an adjustments row whose entry is not that adjustment entry:
-- the API writes both in one transaction, so either is written around it.
SELECT x.id::text AS id, count(*) OVER ()::bigint AS total
FROM (
    SELECT e.id::text AS id, e.posted_at AS at
    FROM journal_entries e
    WHERE e.kind = 'adjustment'
      AND NOT EXISTS (SELECT FROM adjustments a WHERE a.entry_id = e.id AND e.transfer_id = 'adjustment:' || a.id::text)
    UNION ALL
    SELECT 'adjustment:' || a.id::text AS id, a.created_at AS at
    FROM adjustments a
    WHERE NOT EXISTS (SELECT FROM journal_entries e
                      WHERE e.id = a.entry_id AND e.kind = 'adjustment' AND e.transfer_id = 'adjustment:' || a.id::text)
) x
ORDER BY x.at, x.id
LIMIT @row_limit;
