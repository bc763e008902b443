-- The checks of `wallet verify`. Each answers how many rows it looked at, how many break the
-- invariant, and the first offending ids (at most sample_size of them).

-- name: VerifyTransfersHaveOutbox :one
-- Each transfer has exactly one outbox row. Retention deletes acknowledged rows older than the
-- retention, so a transfer older than that may have lost its row legitimately; a younger one
-- may not (its row, acknowledged after the transfer, cannot yet be due for deletion).
WITH bad AS (
    SELECT t.id, t.created_at
    FROM transfers t
    WHERE (t.created_at > clock_timestamp() - make_interval(secs => @retention_seconds::float8)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = t.event_id))
       OR (SELECT count(*) FROM outbox o
           WHERE o.aggregate_id = t.id::text AND o.event_type IN ('TransferCompleted.v1', 'TransferCompleted.v2', 'TransferReversed.v1')) > 1
)
SELECT (SELECT count(*) FROM transfers)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id::text ORDER BY s.created_at, s.id)
                 FROM (SELECT id, created_at FROM bad ORDER BY created_at, id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyOutboxHasTransfers :one
-- Each TransferCompleted (v1 or v2) outbox row belongs to its transfer, each TransferReversed one to its
-- reversal (a transfer that names the transfer it reverses).
WITH bad AS (
    SELECT o.id
    FROM outbox o
    WHERE o.event_type IN ('TransferCompleted.v1', 'TransferCompleted.v2', 'TransferReversed.v1')
      AND NOT EXISTS (SELECT 1 FROM transfers t
                      WHERE t.event_id = o.id AND t.id::text = o.aggregate_id
                        AND (t.reverses_transfer_id IS NULL) = (o.event_type IN ('TransferCompleted.v1', 'TransferCompleted.v2')))
)
SELECT (SELECT count(*) FROM outbox WHERE event_type IN ('TransferCompleted.v1', 'TransferCompleted.v2', 'TransferReversed.v1'))::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id::text ORDER BY s.id)
                 FROM (SELECT id FROM bad ORDER BY id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyBalancesMatchTransfers :one
-- Every balance equals what its wallet received minus what it sent (wallets start at zero).
WITH flows AS (
    SELECT wallet_id, sum(delta)::bigint AS net
    FROM (SELECT to_wallet_id AS wallet_id, amount AS delta FROM transfers
          UNION ALL
          SELECT from_wallet_id, -amount FROM transfers) f
    GROUP BY wallet_id
), bad AS (
    SELECT w.id
    FROM wallets w
    LEFT JOIN flows ON flows.wallet_id = w.id
    WHERE w.balance <> coalesce(flows.net, 0)
)
SELECT (SELECT count(*) FROM wallets)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id ORDER BY s.id)
                 FROM (SELECT id FROM bad ORDER BY id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyCurrencyTotalsZero :one
-- Transfers only move money, so per currency the balances sum to zero (funding wallets hold
-- the negative side).
WITH totals AS (
    SELECT currency, sum(balance) AS total FROM wallets GROUP BY currency
), bad AS (
    SELECT currency, total FROM totals WHERE total <> 0
)
SELECT (SELECT count(*) FROM totals)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.currency || '=' || s.total::text ORDER BY s.currency)
                 FROM (SELECT currency, total FROM bad ORDER BY currency LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyBalanceFloors :one
-- No balance below its floor: a wallet that may not go negative keeps its available balance
-- at or above its minimum, less what forced reversals took it below (forced_debit, itself at
-- most the total of its forced reversals), and its balance at or below its maximum.
WITH forced AS (
    SELECT from_wallet_id AS id, sum(amount) AS total FROM transfers WHERE forced GROUP BY from_wallet_id
), bad AS (
    SELECT w.id FROM wallets w LEFT JOIN forced f ON f.id = w.id
    WHERE (NOT w.allow_negative AND w.balance - w.held < w.min_balance - w.forced_debit)
       OR w.forced_debit > coalesce(f.total, 0)
       OR w.balance > w.max_balance
)
SELECT (SELECT count(*) FROM wallets)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id ORDER BY s.id)
                 FROM (SELECT id FROM bad ORDER BY id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyReversals :one
-- Each reversal moves its original's currency back between its original's wallets, the other
-- way, and each transfer's reversed_amount is the total of its reversals, within its amount.
WITH sums AS (
    SELECT reverses_transfer_id AS id, sum(amount)::bigint AS total
    FROM transfers WHERE reverses_transfer_id IS NOT NULL GROUP BY reverses_transfer_id
), bad AS (
    SELECT t.id, t.created_at
    FROM transfers t
    LEFT JOIN sums s ON s.id = t.id
    LEFT JOIN transfers o ON o.id = t.reverses_transfer_id
    WHERE t.reversed_amount <> coalesce(s.total, 0)
       OR t.reversed_amount > t.amount
       OR (o.id IS NOT NULL AND (o.reverses_transfer_id IS NOT NULL OR o.currency <> t.currency
                                 OR o.from_wallet_id <> t.to_wallet_id OR o.to_wallet_id <> t.from_wallet_id))
)
SELECT (SELECT count(*) FROM transfers)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id::text ORDER BY s.created_at, s.id)
                 FROM (SELECT id, created_at FROM bad ORDER BY created_at, id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyHeldMatchesHolds :one
-- Every wallet's held is the sum of its pending holds (an expired hold the worker has not voided
-- yet is still pending and still held).
WITH pending AS (
    SELECT wallet_id, sum(amount)::bigint AS total FROM holds WHERE status = 'pending' GROUP BY wallet_id
), bad AS (
    SELECT w.id
    FROM wallets w
    LEFT JOIN pending p ON p.wallet_id = w.id
    WHERE w.held <> coalesce(p.total, 0)
)
SELECT (SELECT count(*) FROM wallets)::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id ORDER BY s.id)
                 FROM (SELECT id FROM bad ORDER BY id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyHolds :one
-- Each hold has its HoldPlaced outbox row, and once finished its HoldCaptured or HoldVoided row
-- (rows older than the retention may have been deleted once acknowledged, as a transfer's); a
-- captured hold has its transfer: from its wallet, in its currency, of the captured amount,
-- naming it. And each hold event in the outbox belongs to its hold.
WITH bad_holds AS (
    SELECT h.id::text AS id, h.created_at
    FROM holds h
    LEFT JOIN transfers t ON t.id = h.capture_transfer_id
    WHERE (h.created_at > clock_timestamp() - make_interval(secs => @retention_seconds::float8)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = h.placed_event_id AND o.event_type = 'HoldPlaced.v1'
                                                    AND o.aggregate_id = h.id::text))
       OR (h.status <> 'pending' AND h.finished_at > clock_timestamp() - make_interval(secs => @retention_seconds::float8)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = h.finished_event_id AND o.aggregate_id = h.id::text
                             AND o.event_type = CASE h.status WHEN 'captured' THEN 'HoldCaptured.v1' ELSE 'HoldVoided.v1' END))
       OR (h.status = 'captured' AND (t.id IS NULL OR t.hold_id IS DISTINCT FROM h.id OR t.from_wallet_id <> h.wallet_id
                                      OR t.currency <> h.currency OR t.amount <> h.captured_amount))
), bad_rows AS (
    SELECT o.id::text AS id, o.created_at
    FROM outbox o
    WHERE o.event_type IN ('HoldPlaced.v1', 'HoldCaptured.v1', 'HoldVoided.v1')
      AND NOT EXISTS (SELECT 1 FROM holds h
                      WHERE h.id::text = o.aggregate_id
                        AND CASE o.event_type
                                WHEN 'HoldPlaced.v1' THEN h.placed_event_id = o.id
                                WHEN 'HoldCaptured.v1' THEN h.finished_event_id = o.id AND h.status = 'captured'
                                ELSE h.finished_event_id = o.id AND h.status = 'voided'
                            END)
), bad AS (
    SELECT id, created_at FROM bad_holds UNION ALL SELECT id, created_at FROM bad_rows
)
SELECT ((SELECT count(*) FROM holds)
        + (SELECT count(*) FROM outbox WHERE event_type IN ('HoldPlaced.v1', 'HoldCaptured.v1', 'HoldVoided.v1')))::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id ORDER BY s.created_at, s.id)
                 FROM (SELECT id, created_at FROM bad ORDER BY created_at, id LIMIT @sample_size) s),
                '{}')::text[] AS sample;

-- name: VerifyBatches :one
-- Each transfer batch has 1 to 100 legs, as many as it says, and exactly one
-- TransferBatchCompleted outbox row (within the retention, as a transfer's); no leg has a
-- TransferCompleted row of its own; each batch reversal has its TransferBatchReversed row and
-- as many reversals as it says, each of a leg of its batch, in full.
WITH bad AS (
    SELECT b.id::text AS id, b.created_at
    FROM transfer_batches b
    WHERE (SELECT count(*) FROM transfers l WHERE l.batch_id = b.id) NOT BETWEEN 1 AND 100
       OR (SELECT count(*) FROM transfers l WHERE l.batch_id = b.id) <> b.legs
       OR (SELECT count(*) FROM outbox o WHERE o.aggregate_id = b.id::text AND o.event_type = 'TransferBatchCompleted.v1') > 1
       OR (b.created_at > clock_timestamp() - make_interval(secs => @retention_seconds::float8)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = b.event_id AND o.aggregate_id = b.id::text
                                                    AND o.event_type = 'TransferBatchCompleted.v1'))
       OR EXISTS (SELECT 1 FROM transfers l WHERE l.batch_id = b.id AND l.event_id <> b.event_id)
       OR EXISTS (SELECT 1 FROM transfers l JOIN outbox o ON o.aggregate_id = l.id::text
                  WHERE l.batch_id = b.id AND o.event_type IN ('TransferCompleted.v1', 'TransferCompleted.v2'))
    UNION ALL
    SELECT r.id::text, r.created_at
    FROM batch_reversals r
    WHERE (SELECT count(*) FROM transfers t WHERE t.batch_reversal_id = r.id) <> r.legs
       OR (SELECT count(*) FROM outbox o WHERE o.aggregate_id = r.id::text AND o.event_type = 'TransferBatchReversed.v1') > 1
       OR (r.created_at > clock_timestamp() - make_interval(secs => @retention_seconds::float8)
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.id = r.event_id AND o.aggregate_id = r.id::text
                                                    AND o.event_type = 'TransferBatchReversed.v1'))
       OR EXISTS (SELECT 1 FROM transfers t LEFT JOIN transfers l ON l.id = t.reverses_transfer_id
                  WHERE t.batch_reversal_id = r.id
                    AND (l.batch_id IS DISTINCT FROM r.batch_id OR t.amount <> l.amount OR t.event_id <> r.event_id))
)
SELECT ((SELECT count(*) FROM transfer_batches) + (SELECT count(*) FROM batch_reversals))::bigint AS checked,
       (SELECT count(*) FROM bad)::bigint AS failed,
       coalesce((SELECT array_agg(s.id ORDER BY s.created_at, s.id)
                 FROM (SELECT id, created_at FROM bad ORDER BY created_at, id LIMIT @sample_size) s),
                '{}')::text[] AS sample;
