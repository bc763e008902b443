-- How often the broker answered a publish of the row as a duplicate (inside its window):
-- re-publishes the broker absorbed, for operators and the fault harness's report.

-- +goose Up
ALTER TABLE outbox ADD COLUMN broker_duplicates integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE outbox DROP COLUMN broker_duplicates;
