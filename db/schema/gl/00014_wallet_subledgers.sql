-- Per-wallet sub-ledgers. The accounts the posting rules keep the wallets' money on (2010
-- wallet balances owed to customers, 2020 funds on hold) are control accounts of wallets: each
-- wallet's share of them is a sub-account, and the control account is the sum of its
-- sub-accounts. A journal line names the wallet on its side of the movement (wallet_id: a
-- transfer's debit lines the payer, its credit lines the payee; a hold's lines the hold's
-- wallet; a reversal's lines its original's), so the GL knows, for every wallet, what the
-- wallet service claims it holds, and gl reconcile compares the two.
--
-- A line on a control account must name its wallet: a statement-level trigger refuses, at the
-- INSERT, any line of the statement on such an account without one (the same transition-table
-- pattern as the balance check of 00005). Lines on other accounts may name one (the posting
-- does; 1010's lines then say which external wallet the cash came from or went to).
--
-- Lines posted before this migration are backfilled from their entries: a transfer's from the
-- wallets its description names (every description the GL wrote says "transfer <id> from
-- wallet <a> to wallet <b>"), a hold's from its "hold <id> placed on wallet <w>" or "release of
-- hold <id> on wallet <w>", a reversal's from its original's lines. The journal is append-only,
-- so its trigger is switched off for this one UPDATE, in the migration's transaction. A line on
-- a control account the backfill cannot place (a description written by hand) stays without a
-- wallet, and gl verify names its account and currency ("every wallet control account equals
-- the sum of its wallets' sub-accounts").

-- +goose Up
ALTER TABLE accounts ADD COLUMN wallet_control boolean NOT NULL DEFAULT false;
UPDATE accounts SET wallet_control = true WHERE code IN ('2010', '2020');

ALTER TABLE journal_lines ADD COLUMN wallet_id text CHECK (wallet_id ~ '^[A-Za-z0-9_-]{1,64}$');

ALTER TABLE journal_lines DISABLE TRIGGER journal_lines_append_only;

UPDATE journal_lines l
SET wallet_id = CASE WHEN l.direction = 'debit' THEN e.m[1] ELSE e.m[2] END
FROM (SELECT id, regexp_match(description, '^transfer \S+ from wallet ([A-Za-z0-9_-]{1,64}) to wallet ([A-Za-z0-9_-]{1,64})') AS m
      FROM journal_entries WHERE hold_id IS NULL AND reverses_entry_id IS NULL) e
WHERE l.entry_id = e.id AND e.m IS NOT NULL;

UPDATE journal_lines l
SET wallet_id = e.m[1]
FROM (SELECT id, regexp_match(description, '^(?:hold \S+ placed on wallet|release of hold \S+ on wallet) ([A-Za-z0-9_-]{1,64})') AS m
      FROM journal_entries WHERE hold_id IS NOT NULL) e
WHERE l.entry_id = e.id AND e.m IS NOT NULL;

UPDATE journal_lines l
SET wallet_id = o.wallet_id
FROM journal_entries r
JOIN journal_lines o ON o.entry_id = r.reverses_entry_id
WHERE l.entry_id = r.id AND o.account_code = l.account_code AND o.direction <> l.direction AND o.wallet_id IS NOT NULL;

ALTER TABLE journal_lines ENABLE TRIGGER journal_lines_append_only;

-- A wallet's balance and statement on one account: the wallet's lines in posting order.
CREATE INDEX journal_lines_wallet_idx
    ON journal_lines (wallet_id, account_code, currency, posted_at, id) INCLUDE (direction, amount, entry_id)
    WHERE wallet_id IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION journal_lines_check_wallet() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.entry_id, n.account_code INTO bad
    FROM new_wallet_lines n
    JOIN accounts a ON a.code = n.account_code
    WHERE a.wallet_control AND n.wallet_id IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'journal entry % has a line on account % (a control account of wallets) without a wallet',
            bad.entry_id, bad.account_code
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER journal_lines_wallet_required
    AFTER INSERT ON journal_lines
    REFERENCING NEW TABLE AS new_wallet_lines
    FOR EACH STATEMENT EXECUTE FUNCTION journal_lines_check_wallet();

-- +goose Down
DROP TRIGGER journal_lines_wallet_required ON journal_lines;
DROP FUNCTION journal_lines_check_wallet();
DROP INDEX journal_lines_wallet_idx;
ALTER TABLE journal_lines DROP COLUMN wallet_id;
ALTER TABLE accounts DROP COLUMN wallet_control;
