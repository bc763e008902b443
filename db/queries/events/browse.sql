-- The operator console's reads (internal/console): a page of one status's rows, narrowed by a
-- filter, in id order after a cursor. The filter matches a row's id, aggregate (the transfer)
-- or event id exactly, or a piece of its error text.

-- name: BrowseOutbox :many
SELECT * FROM outbox
WHERE status = @status
  AND id > @after::uuid
  AND (@filter::text = ''
       OR id::text = @filter::text
       OR aggregate_id = @filter::text
       OR event_type = @filter::text
       OR strpos(lower(coalesce(last_error, '')), lower(@filter::text)) > 0)
ORDER BY id
LIMIT @row_limit;

-- name: BrowseInbox :many
SELECT * FROM inbox
WHERE status = @status
  AND id > @after::text
  AND (@filter::text = ''
       OR id = @filter::text
       OR event_id = @filter::text
       OR event_type = @filter::text
       OR reason = @filter::text
       OR strpos(lower(coalesce(detail, '')), lower(@filter::text)) > 0)
ORDER BY id
LIMIT @row_limit;

-- name: BrowseOutboxUnacknowledged :many
-- BrowseOutboxUnacknowledged is the console's default outbox page: every row not acknowledged
-- (whatever its status) in id order after a cursor, read through outbox_unacknowledged_idx,
-- never the acknowledged rows retention keeps.
SELECT * FROM outbox
WHERE status <> 'acknowledged'
  AND id > @after::uuid
  AND (@filter::text = ''
       OR id::text = @filter::text
       OR aggregate_id = @filter::text
       OR event_type = @filter::text
       OR strpos(lower(coalesce(last_error, '')), lower(@filter::text)) > 0)
ORDER BY id
LIMIT @row_limit;

-- name: BrowseOutboxAll :many
-- BrowseOutboxAll is every outbox row, whatever its status, in id order after a cursor.
SELECT * FROM outbox
WHERE id > @after::uuid
  AND (@filter::text = ''
       OR id::text = @filter::text
       OR aggregate_id = @filter::text
       OR event_type = @filter::text
       OR strpos(lower(coalesce(last_error, '')), lower(@filter::text)) > 0)
ORDER BY id
LIMIT @row_limit;
