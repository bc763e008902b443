-- reconcile_transfers_v1: the wallet's transfers as the GL's reconciliation reads them when it
-- is given the wallet's database (GL_RECONCILE_WALLET_DATABASE_URL, for gl reconcile and the
-- check at the end of gl replay) instead of the wallet's API. The GL reads this view and nothing
-- else of this database, through its own queries (db/queries/reconcile), over a read-only
-- connection that a replica can serve.
--
-- It is a published contract, like the API: its name, columns and their meaning never change.
-- A change is a new view (reconcile_transfers_v2) next to this one; v1 is dropped only once no
-- GL reads it. The tables under it may change freely as long as the view keeps its promise.
--
--   id          the transfer's id (the transfer_id of its GL entry)
--   amount      minor units, > 0
--   currency    ISO 4217 code, three upper-case letters
--   created_at  when the transfer committed in the wallet (the event's created_at)

-- +goose Up
CREATE VIEW reconcile_transfers_v1 AS
SELECT id, amount, currency, created_at
FROM transfers;

COMMENT ON VIEW reconcile_transfers_v1 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile); columns never change, see db/schema/wallet/00002_reconcile_transfers_v1.sql';

-- +goose Down
DROP VIEW reconcile_transfers_v1;
