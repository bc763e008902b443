-- The W3C trace context of the work that wrote the row: the traceparent of the
-- wallet's commit span, or of the GL's post span for its acknowledgment. The relay publishes
-- the row under a publish span that is its child and puts that span's traceparent into the
-- message's headers, so one transfer is one trace across both services. NULL when the row was
-- written without a trace (tracing off, or rows older than this column).

-- +goose Up
ALTER TABLE outbox ADD COLUMN trace_context text;
COMMENT ON COLUMN outbox.trace_context IS 'W3C traceparent of the span that wrote the row; NULL when untraced';

-- +goose Down
ALTER TABLE outbox DROP COLUMN trace_context;
