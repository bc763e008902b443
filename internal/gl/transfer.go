package gl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"walletgl/internal/events"
)

// TransferPoster turns each TransferCompleted event into a journal entry and acknowledges it
// with a TransferPosted event in the GL's outbox, both in the consumer's transaction.
type TransferPoster struct {
	rule   PostingRule
	poster Poster
	outbox *events.Outbox
	logger zerolog.Logger
}

var _ events.BatchHandler = (*TransferPoster)(nil)

// NewTransferPoster returns the handler for TransferCompleted events. Check the rule against
// the chart of accounts (PostingRule.Check) before consuming.
func NewTransferPoster(rule PostingRule, poster Poster, logger zerolog.Logger) *TransferPoster {
	return &TransferPoster{rule: rule, poster: poster, outbox: events.NewOutbox(events.SourceGL), logger: logger}
}

// PublishOnCommit has the acknowledgments this poster writes published by r, the GL's relay,
// as soon as their transaction commits (events.Outbox.PublishOnCommit).
func (p *TransferPoster) PublishOnCommit(r *events.Relay) *TransferPoster {
	p.outbox.PublishOnCommit(r)
	return p
}

// Handle posts the transfer in env and writes its acknowledgment, using tx for both. An event
// that can never be posted returns an events.ErrMalformed error and writes nothing.
func (p *TransferPoster) Handle(ctx context.Context, tx pgx.Tx, env events.Envelope) error {
	entry, data, err := p.entryFor(env)
	if err != nil {
		return err
	}
	created, err := p.poster.Post(ctx, tx, entry)
	if err != nil {
		return fmt.Errorf("post transfer %s: %w", data.TransferID, err)
	}

	ack := events.TransferPosted{TransferID: data.TransferID, SourceEventID: env.ID, EntryID: entry.ID.String(), PostedAt: time.Now().UTC()}
	if finder, ok := p.poster.(PostingFinder); ok {
		stored, err := finder.PostedEntry(ctx, tx, data.TransferID)
		switch {
		case errors.Is(err, ErrEntryNotFound) && !created:
			// The conflict was on event_id: this event id was already posted for another
			// transfer. Retrying cannot help, and acknowledging would be a lie.
			return events.Permanent(fmt.Errorf("post transfer %s: event %s already posted for another transfer", data.TransferID, env.ID))
		case err != nil:
			return fmt.Errorf("find posting of transfer %s: %w", data.TransferID, err)
		}
		ack.EntryID, ack.PostedAt = stored.ID.String(), stored.PostedAt
	} else if !created {
		ack.EntryID = "" // the external GL did not say which entry holds the posting
	}
	if !created {
		p.log(ctx).Warn().Str("transfer_id", data.TransferID).Str("event_id", env.ID).
			Str("entry_id", ack.EntryID).Msg("transfer already has posting; skipping duplicate create")
	}

	// The wallet waits for this acknowledgment also for a duplicate: its outbox row for this
	// event stays unacknowledged, and re-published, until one arrives.
	ackID, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("new event id: %w", err)
	}
	_, err = p.outbox.Add(ctx, tx, events.Event{
		ID: ackID, Type: events.TypeTransferPosted, AggregateID: data.TransferID, Time: ack.PostedAt, Data: ack,
	})
	if err != nil {
		return fmt.Errorf("acknowledge transfer %s: %w", data.TransferID, err)
	}
	return nil
}

// entryFor decodes and checks a TransferCompleted event and builds its entry by the rule.
func (p *TransferPoster) entryFor(env events.Envelope) (Entry, events.TransferCompleted, error) {
	var data events.TransferCompleted
	if env.Type != events.TypeTransferCompleted {
		return Entry{}, data, events.Permanent(fmt.Errorf("post event %s: type %q is not %s", env.ID, env.Type, events.TypeTransferCompleted))
	}
	if err := env.DecodeData(&data); err != nil {
		return Entry{}, data, err
	}
	if err := data.Validate(); err != nil {
		return Entry{}, data, fmt.Errorf("validate event %s: %w", env.ID, err)
	}
	entryID, err := uuid.NewV7()
	if err != nil {
		return Entry{}, data, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:          entryID,
		EventID:     env.ID,
		TransferID:  data.TransferID,
		Currency:    data.Currency,
		Description: fmt.Sprintf("transfer %s from wallet %s to wallet %s", data.TransferID, data.FromWalletID, data.ToWalletID),
		OccurredAt:  data.CreatedAt,
		Lines:       p.rule.lines(data.Amount),
	}, data, nil
}

// HandleBatch posts a whole batch of fresh events when the poster can (BatchPoster), in a few
// statements, and writes their acknowledgments. Any event that cannot be posted fails the
// batch; the consumer then handles each event alone, so the bad one fails alone.
func (p *TransferPoster) HandleBatch(ctx context.Context, tx pgx.Tx, envs []events.Envelope) error {
	bp, ok := p.poster.(BatchPoster)
	if !ok {
		for _, env := range envs {
			if err := p.Handle(ctx, tx, env); err != nil {
				return err
			}
		}
		return nil
	}
	entries := make([]Entry, len(envs))
	for i, env := range envs {
		entry, _, err := p.entryFor(env)
		if err != nil {
			return err
		}
		entries[i] = entry
	}
	postings, err := bp.PostBatch(ctx, tx, entries)
	if err != nil {
		return fmt.Errorf("post %d transfers: %w", len(entries), err)
	}
	acks := make([]events.Event, len(entries))
	for i, posting := range postings {
		e := entries[i]
		if !posting.Created {
			p.log(ctx).Warn().Str("transfer_id", e.TransferID).Str("event_id", e.EventID).
				Str("entry_id", posting.Entry.ID.String()).Msg("transfer already has posting; skipping duplicate create")
		}
		ackID, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new event id: %w", err)
		}
		acks[i] = events.Event{ID: ackID, Type: events.TypeTransferPosted, AggregateID: e.TransferID, Time: posting.Entry.PostedAt,
			Data: events.TransferPosted{TransferID: e.TransferID, SourceEventID: e.EventID, EntryID: posting.Entry.ID.String(), PostedAt: posting.Entry.PostedAt}}
	}
	if _, err := p.outbox.AddBatch(ctx, tx, acks); err != nil {
		return fmt.Errorf("acknowledge %d transfers: %w", len(acks), err)
	}
	return nil
}

// log prefers the event-scoped logger the consumer put into ctx, which carries its fields.
func (p *TransferPoster) log(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &p.logger
}
