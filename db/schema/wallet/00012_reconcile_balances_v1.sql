-- What the GL's reconcile compares each wallet's sub-ledger with: two versioned read-only
-- contracts, like reconcile_transfers_v3 and reconcile_holds_v1 (their columns and their
-- meaning never change; a change is a _v2 beside them).
--
-- reconcile_balances_v1: every wallet's balance and held amount, and whether it may go negative
-- (an external wallet, whose money is outside what the customers are owed).
--
-- reconcile_movements_v1: what each movement did to each wallet, keyed by the movement's key in
-- the GL's journal (journal_entries.transfer_id): a transfer or reversal (its id) moves its
-- amount out of its from-wallet's balance and into its to-wallet's; a hold's placement
-- (hold:<id>:placed) adds its amount to the wallet's held, its release (hold:<id>:released,
-- once captured or voided) takes it back out. gl reconcile reads both in one snapshot and
-- leaves out of each wallet's figures the movements the GL has not posted yet (docs/gl.md).

-- +goose Up
CREATE VIEW reconcile_balances_v1 AS
SELECT id AS wallet_id, currency, balance, held, allow_negative
FROM wallets;

COMMENT ON VIEW reconcile_balances_v1 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): wallet balances; columns never change, see db/schema/wallet/00012_reconcile_balances_v1.sql';

CREATE VIEW reconcile_movements_v1 AS
SELECT t.id::text AS movement_id, t.from_wallet_id AS wallet_id, t.currency,
       (-t.amount)::bigint AS balance_change, 0::bigint AS held_change
FROM transfers t
UNION ALL
SELECT t.id::text, t.to_wallet_id, t.currency, t.amount, 0::bigint
FROM transfers t
UNION ALL
SELECT 'hold:' || h.id::text || ':placed', h.wallet_id, h.currency, 0::bigint, h.amount
FROM holds h
UNION ALL
SELECT 'hold:' || h.id::text || ':released', h.wallet_id, h.currency, 0::bigint, -h.amount
FROM holds h
WHERE h.status <> 'pending';

COMMENT ON VIEW reconcile_movements_v1 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): each movement''s change to each wallet; columns never change, see db/schema/wallet/00012_reconcile_balances_v1.sql';

-- +goose Down
DROP VIEW reconcile_movements_v1;
DROP VIEW reconcile_balances_v1;
