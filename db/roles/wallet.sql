-- The wallet's own tables (db/queries/wallet).

-- Wallets are created, locked (SELECT … FOR NO KEY UPDATE needs UPDATE), their balances,
-- limits and metadata changed; never deleted.
GRANT SELECT, INSERT, UPDATE ON wallets TO :"runtime_role";

-- A transfer is written once; only the running total of its reversals changes after.
GRANT SELECT, INSERT ON transfers TO :"runtime_role";
GRANT UPDATE (reversed_amount) ON transfers TO :"runtime_role";

-- A transfer batch and a batch reversal are written once, never changed (00016).
GRANT SELECT, INSERT ON transfer_batches, batch_reversals TO :"runtime_role";

-- reconcile_transfers_v1 to _v4, reconcile_holds_v1, reconcile_balances_v1 and
-- reconcile_movements_v1 and _v2 are for the GL's reconcile, which reads
-- them with a role of its own (docs/database-roles.md): the wallet itself never reads them.

-- A hold is placed once and finished once (captured or voided): only its status columns
-- change after. Holds are never deleted.
GRANT SELECT, INSERT ON holds TO :"runtime_role";
GRANT UPDATE (status, void_reason, captured_amount, capture_transfer_id, finished_event_id, finished_at)
    ON holds TO :"runtime_role";

-- A refused request's answer is kept under its key (00008_owners.sql): inserted, replaced once
-- expired, and deleted once expired by later refusals.
GRANT SELECT, INSERT, UPDATE, DELETE ON refusals TO :"runtime_role";
