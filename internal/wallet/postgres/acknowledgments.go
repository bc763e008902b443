package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
)

// Acknowledgments is the acknowledgment consumer's handler: each TransferPosted event from the
// GL moves the outbox rows of the transfers it posted to acknowledged, one event at a time or
// a whole fetched batch in one statement.
type Acknowledgments struct {
	outbox acknowledger
}

// acknowledger moves outbox rows to acknowledged in the consumer's transaction: the wallet's
// outbox, or its relay, which also records the publishes whose marks it holds.
type acknowledger interface {
	Acknowledge(ctx context.Context, db database.Executor, ids ...uuid.UUID) (int64, error)
}

var _ inbox.Handler = (*Acknowledgments)(nil)

// NewAcknowledgments returns the handler of the GL's acknowledgments, for the wallet's database.
func NewAcknowledgments() *Acknowledgments {
	return &Acknowledgments{outbox: outbox.New(contract.SourceWallet)}
}

// NewRelayAcknowledgments is NewAcknowledgments for the consumer that runs beside relay, the
// wallet's: a row whose mark relay holds (outbox.RelayConfig.MarkDelay) is acknowledged and
// marked in one update.
func NewRelayAcknowledgments(relay *outbox.Relay) *Acknowledgments {
	return &Acknowledgments{outbox: relay}
}

// Handle acknowledges the outbox rows of a batch of acknowledgments (TransferPosted.v2, or
// .v1 from a GL not yet upgraded) in one statement, in tx, the consumer's transaction. An event
// that can never be applied fails the batch with a permanent error (the consumer then takes
// the events one by one, and that one is dead-lettered alone).
func (a *Acknowledgments) Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	ids := make([]uuid.UUID, 0, len(envs))
	for _, env := range envs {
		rows, err := acknowledgedRows(env)
		if err != nil {
			return err
		}
		ids = append(ids, rows...)
	}
	n, err := a.outbox.Acknowledge(ctx, tx, ids...)
	if err != nil {
		return err
	}
	if n < int64(len(ids)) {
		// Repeated acknowledgments, or rows retention already removed.
		zerolog.Ctx(ctx).Debug().Int("postings", len(ids)).Int64("acknowledged", n).Msg("some transfers were already acknowledged")
	}
	return nil
}

// acknowledgedRows returns the wallet outbox rows an acknowledgment names.
func acknowledgedRows(env contract.Envelope) ([]uuid.UUID, error) {
	postings, err := contract.DecodePostings(env)
	if err != nil {
		return nil, fmt.Errorf("handle %s: %w", env.Type, err)
	}
	ids := make([]uuid.UUID, len(postings))
	for i, posted := range postings {
		id, err := uuid.Parse(posted.SourceEventID)
		if err != nil {
			return nil, contract.Permanent(fmt.Errorf("source_event_id %q is not a uuid: %w", posted.SourceEventID, err))
		}
		ids[i] = id
	}
	return ids, nil
}
