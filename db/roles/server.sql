-- The server's settings that serve warns about (internal/database CheckServer): autovacuum off
-- never reclaims the space of the outbox's and inbox's deleted rows, so their tables and indexes
-- grow on disk for ever under a steady load.
SELECT current_setting('autovacuum')::bool AS autovacuum;
