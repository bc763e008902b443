-- name: LockPostingRulesShared :exec
-- Taken by every posting batch before it reads the rules, held to its commit: gl rules set
-- takes it exclusively, so a batch reads the rules after a new one commits, never before it
-- while posting an event the new rule would cover.
SELECT /* fixed plan */ pg_advisory_xact_lock_shared(@lock_key::bigint);

-- name: LockPostingRulesExclusive :exec
-- gl rules set: waits for the batches posting now, and holds new ones back, until it commits.
SELECT pg_advisory_xact_lock(@lock_key::bigint);

-- name: ListPostingRules :many
-- Every rule; the seed rules' -infinity reads as the year 1, Go's zero time (Go has no
-- infinite time; a rule set by gl rules set is never older than its day). A fixed plan: it has
-- no parameter and reads the whole (small) table whatever plan it gets.
SELECT /* fixed plan */ event_type, kind, currency, greatest(effective_from, '0001-01-01 00:00:00Z'::timestamptz)::timestamptz AS effective_from,
       debit_account, credit_account, created_at
FROM posting_rules
ORDER BY event_type, kind, currency, effective_from;

-- name: InsertPostingRule :one
-- No row when the key (event type, kind, currency, effective_from) is taken: the caller names
-- the error.
INSERT INTO posting_rules (event_type, kind, currency, effective_from, debit_account, credit_account)
VALUES (@event_type, @kind, @currency, @effective_from, @debit_account, @credit_account)
ON CONFLICT DO NOTHING
RETURNING created_at;

-- name: GetPostingRule :one
SELECT event_type, kind, currency, effective_from, debit_account, credit_account, created_at
FROM posting_rules
WHERE event_type = @event_type AND kind = @kind AND currency = @currency AND effective_from = @effective_from;

-- name: DeletePostingRule :execrows
-- gl rules withdraw; the trigger posting_rules_guard (db/schema/gl/00013) refuses a rule in effect.
DELETE FROM posting_rules
WHERE event_type = @event_type AND kind = @kind AND currency = @currency AND effective_from = @effective_from;

-- name: CopyPostingRule :exec
-- gl replay: the live GL's rules into the rebuild, -infinity (the zero time) included; a seed rule the
-- target's migrations wrote already is left as it is.
INSERT INTO posting_rules (event_type, kind, currency, effective_from, debit_account, credit_account, created_at)
VALUES (@event_type, @kind, @currency,
        CASE WHEN @effective_from::timestamptz <= '0001-01-01 00:00:00Z' THEN '-infinity' ELSE @effective_from::timestamptz END,
        @debit_account, @credit_account, @created_at)
ON CONFLICT DO NOTHING;

-- name: LatestOccurredAt :one
-- The latest time of an entry posted under a rule of this event type and kind, in this
-- currency ('': any): a new rule must not take effect before it, or it would say otherwise
-- about an event already posted. A TransferCompleted.v2 rule also made the batch legs of its
-- kind (a leg of no recorded kind: of any kind) in its currency.
SELECT greatest(
    (SELECT max(j.occurred_at) FROM journal_entries j
     WHERE j.event_type = @event_type::text AND j.kind = @kind::text AND (@currency::text = '' OR j.currency = @currency::text)),
    (SELECT max(e.occurred_at) FROM journal_entries e JOIN journal_lines l ON l.entry_id = e.id
     WHERE @event_type::text = 'TransferCompleted.v2' AND e.event_type = 'TransferBatchCompleted.v1'
       AND (l.leg_kind IS NULL OR l.leg_kind = @kind::text) AND (@currency::text = '' OR l.currency = @currency::text)),
    '0001-01-01 00:00:00Z'::timestamptz)::timestamptz AS latest;

-- name: StatementNow :one
SELECT now()::timestamptz AS now;
