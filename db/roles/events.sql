-- What the outbox relay and the inbox consumer (internal/events) and the outbox and inbox
-- commands do, in both services (db/queries/events).

-- Transfers and postings insert their events; the relay claims and marks rows (UPDATE, also
-- SELECT … FOR UPDATE SKIP LOCKED) and retention deletes acknowledged ones.
GRANT SELECT, INSERT, UPDATE, DELETE ON outbox TO :"runtime_role";

-- The consumer claims events (INSERT … ON CONFLICT DO UPDATE), marks them processed, failed or
-- waiting, reclaims waiting ones (SELECT … FOR UPDATE SKIP LOCKED), and its retention deletes
-- the rows of processed events past EVENTS_INBOX_RETENTION (DELETE, with SELECT … FOR UPDATE
-- SKIP LOCKED); failed and waiting rows are never deleted.
GRANT SELECT, INSERT, UPDATE, DELETE ON inbox TO :"runtime_role";
