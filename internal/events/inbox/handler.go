package inbox

import (
	"context"

	"walletgl/internal/events/contract"

	"github.com/jackc/pgx/v5"
)

// Handler applies a batch of new events inside the consumer's transaction, after the inbox claimed
// them and before the inbox marks them processed: all commit together. A single event is a batch of
// one. A contract.Permanent (or contract.Conflict) error says the batch holds an event that can
// never be applied: the consumer then applies the events one at a time, and records that one
// failed; any other error rolls back and the events are delivered again after a delay.
type Handler interface {
	Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error
}

// HandlerFunc adapts a function of one event to Handler: it is called for each event in turn.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error

// Handle calls f for each event, stopping at the first error.
func (f HandlerFunc) Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	for _, env := range envs {
		if err := f(ctx, tx, env); err != nil {
			return err
		}
	}
	return nil
}

// DuplicateHandler is a Handler whose events expect an answer from it (an acknowledgment event
// of its own). A duplicate of an event it processed before means the producer is still
// waiting for that answer (it was lost, purged, or never applied on the other side), so the
// inbox hands such duplicates to HandleDuplicates, in the transaction, to answer again; the
// answer must be idempotent. Duplicates of events recorded failed are not handed over.
type DuplicateHandler interface {
	HandleDuplicates(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error
}

// Satisfier is a Handler some of whose events wait for others (contract.NotYet with a key):
// Satisfies names the keys an applied event lets waiting events go on with (contract.WaitTransfer,
// contract.WaitHold). The consumer retries the events waiting for those keys as soon as the event
// commits; without a Satisfier, waiting events are retried on the consumer's tick alone.
type Satisfier interface {
	Satisfies(env contract.Envelope) []string
}
