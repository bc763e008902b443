package events

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Handler applies one event inside the consumer's transaction, after the inbox claimed it and
// before the inbox marks it processed: all three commit together. A Permanent error records
// the event as failed (poison) and terminates it at the broker; any other error rolls back and
// the event is delivered again after a delay.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, env Envelope) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, env Envelope) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, tx pgx.Tx, env Envelope) error {
	return f(ctx, tx, env)
}

// BatchHandler is a Handler that can also apply a whole fetched batch of fresh events in one
// call, inside the consumer's transaction (multi-row statements instead of a few per event). If
// HandleBatch fails, the transaction rolls back and the consumer retries each event alone
// through Handle, so a bad event fails alone.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, tx pgx.Tx, envs []Envelope) error
}

// DuplicateHandler is a Handler whose events expect an answer from it (an acknowledgment event
// of its own). A duplicate of an event it processed before means the producer is still
// waiting for that answer (it was lost, purged, or never applied on the other side), so the
// consumer hands such duplicates to HandleDuplicates, in a transaction, to answer again; the
// answer must be idempotent. Duplicates of events recorded failed are not handed over.
type DuplicateHandler interface {
	HandleDuplicates(ctx context.Context, tx pgx.Tx, envs []Envelope) error
}
