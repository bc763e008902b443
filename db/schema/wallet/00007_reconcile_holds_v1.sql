-- reconcile_holds_v1: the wallet's holds (00005_holds.sql) for the GL's reconciliation
-- (gl reconcile), which compares each hold with its GL entries: its placement
-- (hold:<id>:placed) always, its release (hold:<id>:released) once it is captured or voided,
-- each of the hold's amount and currency. A published contract like reconcile_transfers_v2:
-- its columns and their meaning never change; a change is a new view, reconcile_holds_v2.
--
--   id          the hold (uuid)
--   wallet_id   the wallet whose funds it holds
--   amount      what it holds, in minor units; also what its release releases
--   currency    ISO 4217
--   status      pending | captured | voided
--   created_at  when it was placed
--   finished_at when it was captured or voided; NULL while pending

-- The index pages GET /v1/holds (created_at, id), the listing the GL's reconcile reads in API
-- mode, as transfers_created_at_idx pages GET /v1/transfers.

-- +goose Up
CREATE INDEX holds_created_at_idx ON holds (created_at, id);

CREATE VIEW reconcile_holds_v1 AS
SELECT id, wallet_id, amount, currency, status, created_at, finished_at
FROM holds;

COMMENT ON VIEW reconcile_holds_v1 IS
    'Versioned read-only contract for the GL''s reconciliation (gl reconcile): holds; columns never change, see db/schema/wallet/00007_reconcile_holds_v1.sql';

-- +goose Down
DROP VIEW reconcile_holds_v1;
DROP INDEX holds_created_at_idx;
