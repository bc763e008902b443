package gl

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
)

// TransferPoster turns each TransferCompleted event into a journal entry, each
// TransferReversed event into an entry reversing its transfer's (reversal.go), and each hold
// event into its placement or release (hold.go), and
// acknowledges them with a TransferPosted.v2 event in the GL's outbox (one per batch), all in
// the consumer's transaction.
type TransferPoster struct {
	rules   RuleStore
	holds   HoldRules // hold events' postings (hold.go)
	ledger  Poster
	outbox  *outbox.Outbox
	logger  zerolog.Logger
	metrics *metrics.GL
}

var (
	_ inbox.Handler          = (*TransferPoster)(nil)
	_ inbox.DuplicateHandler = (*TransferPoster)(nil)
)

// NewTransferPoster returns the handler for TransferCompleted (v1 and v2), TransferReversed
// and hold events, posting each transfer by the rule in force for its event type, kind and
// time, read from rules once per batch, and each hold event by DefaultHoldRules.
func NewTransferPoster(rules RuleStore, ledger Poster, logger zerolog.Logger) *TransferPoster {
	return &TransferPoster{rules: rules, holds: DefaultHoldRules, ledger: ledger, outbox: outbox.New(contract.SourceGL), logger: logger}
}

// WithHoldRules has the poster post hold events by r instead of DefaultHoldRules. Check r
// against the chart of accounts (HoldRules.Check) before consuming.
func (p *TransferPoster) WithHoldRules(r HoldRules) *TransferPoster {
	p.holds = r
	return p
}

// WithMetrics has the poster record each new posting's time from commit to posting, once its
// transaction has committed.
func (p *TransferPoster) WithMetrics(m *metrics.GL) *TransferPoster {
	p.metrics = m
	return p
}

// PublishOnCommit has the acknowledgments this poster writes published by r, the GL's relay,
// as soon as their transaction commits (outbox.Outbox.PublishOnCommit).
func (p *TransferPoster) PublishOnCommit(r *outbox.Relay) *TransferPoster {
	p.outbox.PublishOnCommit(r)
	return p
}

// Handle posts a batch of new events in a few statements and writes their acknowledgments, all in
// tx, the consumer's transaction. An event that can never be posted (contract.ErrMalformed) or that
// contradicts the posting of its transfer (contract.ErrConflict) fails the batch and writes
// nothing; the consumer then handles each event alone, so the bad one fails alone.
func (p *TransferPoster) Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	return p.post(ctx, tx, envs, false)
}

// HandleDuplicates answers events posted before with a fresh acknowledgment naming the stored
// entry: the wallet re-publishes an event until an acknowledgment of it arrives, so a duplicate
// means the first acknowledgment was lost on the way or never applied. The answer is
// idempotent on the wallet's side.
func (p *TransferPoster) HandleDuplicates(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	return p.post(ctx, tx, envs, true)
}

// Satisfies names what posting env lets a waiting event go on with (inbox.Satisfier): a
// transfer its reversals, a hold's placement its release. An event it cannot read satisfies
// nothing.
func (p *TransferPoster) Satisfies(env contract.Envelope) []string {
	switch env.Type {
	case contract.TypeTransferCompleted, contract.TypeTransferCompletedV2:
		if t, err := contract.DecodeTransferCompleted(env); err == nil {
			return []string{contract.WaitTransfer(t.TransferID)}
		}
	case contract.TypeHoldPlaced:
		var h contract.HoldPlaced
		if err := env.DecodeData(&h); err == nil {
			return []string{contract.WaitHold(h.HoldID)}
		}
	}
	return nil
}

func (p *TransferPoster) post(ctx context.Context, tx pgx.Tx, envs []contract.Envelope, answering bool) error {
	entries := make([]Entry, len(envs))
	var transfers, reversals, holds []int // indexes into envs
	reversed := map[int]contract.TransferReversed{}
	var rules Rules
	rulesRead := false
	for i, env := range envs {
		if IsHoldEvent(env.Type) {
			holds = append(holds, i)
			continue
		}
		if env.Type == contract.TypeTransferReversed {
			data, err := decodeReversal(env)
			if err != nil {
				return err
			}
			reversed[i] = data
			reversals = append(reversals, i)
			continue
		}
		if !rulesRead { // once per batch, and not at all for a batch of reversals
			var err error
			if rules, err = p.rules.PostingRules(ctx, tx); err != nil {
				return fmt.Errorf("read posting rules: %w", err)
			}
			rulesRead = true
		}
		entry, err := entryFor(env, rules)
		if err != nil {
			return err
		}
		entries[i] = entry
		transfers = append(transfers, i)
	}
	postings := make([]Posting, len(envs))
	// Transfers first: a reversal of the batch may reverse one of them.
	if err := p.postSome(ctx, tx, entries, postings, transfers); err != nil {
		return err
	}
	if err := p.postHolds(ctx, tx, holds, envs, entries, postings); err != nil {
		return err
	}
	if len(reversals) > 0 {
		if err := p.reversalEntries(ctx, tx, reversals, reversed, envs, entries); err != nil {
			return err
		}
		if err := p.postSome(ctx, tx, entries, postings, reversals); err != nil {
			return err
		}
	}
	p.observeOnCommit(tx, postings)
	for i, posting := range postings {
		if err := p.checkPosting(ctx, entries[i], posting, answering, envs[i].TraceParent); err != nil {
			return err
		}
	}
	acks, err := acknowledgments(envs, entries, postings)
	if err != nil {
		return err
	}
	if _, err := p.outbox.AddBatch(ctx, tx, acks); err != nil {
		return fmt.Errorf("acknowledge %d transfers: %w", len(entries), err)
	}
	return nil
}

// postSome posts the entries at indexes idx in one PostBatch and puts their postings at the
// same indexes.
func (p *TransferPoster) postSome(ctx context.Context, tx pgx.Tx, entries []Entry, postings []Posting, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	some := make([]Entry, len(idx))
	for j, i := range idx {
		some[j] = entries[i]
	}
	posted, err := p.ledger.PostBatch(ctx, tx, some)
	if errors.Is(err, ErrEventTaken) {
		return contract.Conflict(err)
	}
	if err != nil {
		return fmt.Errorf("post %d movements: %w", len(some), err)
	}
	for j, i := range idx {
		postings[i] = posted[j]
	}
	return nil
}

// acknowledgments are the TransferPosted.v2 events of a batch: one, or one per
// contract.MaxPostingsPerEvent postings when a batch is larger (EVENTS_BATCH_SIZE has no upper
// bound, and the wallet refuses a longer list). Each continues the trace of its first traced
// event, from the span posting it: that transfer's trace goes on to the wallet's acknowledge span.
func acknowledgments(envs []contract.Envelope, entries []Entry, postings []Posting) ([]outbox.Event, error) {
	acks := make([]outbox.Event, 0, (len(postings)+contract.MaxPostingsPerEvent-1)/contract.MaxPostingsPerEvent)
	for from := 0; from < len(postings); from += contract.MaxPostingsPerEvent {
		to := min(from+contract.MaxPostingsPerEvent, len(postings))
		ack, err := acknowledgment(entries[from:to], postings[from:to])
		if err != nil {
			return nil, err
		}
		ack.TraceParent = firstTraceParent(envs[from:to])
		acks = append(acks, ack)
	}
	return acks, nil
}

// firstTraceParent is the trace context of the first traced event of envs ("": none is).
func firstTraceParent(envs []contract.Envelope) string {
	for _, env := range envs {
		if env.TraceParent != "" {
			return env.TraceParent
		}
	}
	return ""
}

// observeOnCommit records the commit-to-posted time of the postings tx creates, once it has
// committed (a rolled-back posting never happened).
func (p *TransferPoster) observeOnCommit(tx pgx.Tx, postings []Posting) {
	if p.metrics == nil {
		return
	}
	var created []Entry
	for _, posting := range postings {
		if posting.Created {
			created = append(created, posting.Entry)
		}
	}
	if len(created) > 0 {
		database.AfterCommit(tx, func() {
			for _, e := range created {
				p.metrics.Posted(e.OccurredAt, e.PostedAt)
			}
		})
	}
}

// checkPosting refuses, as a conflict, an entry whose transfer was posted before with another
// amount, currency or wallets: a forged or corrupted event. The same transfer posted by another
// event with the same figures is acknowledged, with a warning. traceParent is the event's trace
// context, whose trace id its log lines carry.
func (p *TransferPoster) checkPosting(ctx context.Context, e Entry, posting Posting, answering bool, traceParent string) error {
	stored := posting.Entry
	switch {
	case posting.Created:
		return nil
	case stored.Currency != e.Currency || !posting.Amount.Equal(SumOf(e.Debits())) || stored.Description != e.Description:
		return contract.Conflict(fmt.Errorf("transfer %s was posted as %s %s (%s) by event %s; event %s says %d %s (%s)",
			e.TransferID, posting.Amount, stored.Currency, stored.Description, stored.EventID,
			e.EventID, e.Debits(), e.Currency, e.Description))
	case stored.EventID == e.EventID && answering:
		tracing.LogTraceID(p.log(ctx).Debug(), tracing.TraceIDOf(traceParent)).Str("transfer_id", e.TransferID).Str("event_id", e.EventID).Msg("duplicate of a posted event; acknowledging it again")
	case stored.EventID == e.EventID:
		// The inbox no longer knew the event (its row deleted past EVENTS_INBOX_RETENTION, or
		// gl replay): the journal's unique event and transfer ids kept it from posting twice.
		tracing.LogTraceID(p.log(ctx).Info(), tracing.TraceIDOf(traceParent)).Str("transfer_id", e.TransferID).Str("event_id", e.EventID).
			Msg("event posted before and unknown to the inbox; acknowledging it again")
	default:
		tracing.LogTraceID(p.log(ctx).Warn(), tracing.TraceIDOf(traceParent)).Str("transfer_id", e.TransferID).Str("event_id", e.EventID).Str("entry_id", stored.ID.String()).
			Msg("transfer already posted by another event with the same figures; acknowledging")
	}
	return nil
}

// acknowledgment is the one TransferPosted.v2 event of a batch: each posting, naming the event
// it posted and the stored entry. One event per batch rather than per posting: one outbox row,
// one signature, one message and one wallet inbox row for the whole batch. Its aggregate is the
// batch's first transfer.
func acknowledgment(entries []Entry, postings []Posting) (outbox.Event, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return outbox.Event{}, fmt.Errorf("new event id: %w", err)
	}
	data := contract.TransferPostings{Postings: make([]contract.TransferPosted, len(postings))}
	for i, posting := range postings {
		stored := posting.Entry
		data.Postings[i] = contract.TransferPosted{TransferID: stored.TransferID, SourceEventID: entries[i].EventID, EntryID: stored.ID.String(), PostedAt: stored.PostedAt}
	}
	first := postings[0].Entry
	return outbox.Event{ID: id, Type: contract.TypeTransferPostedV2, AggregateID: first.TransferID, Time: first.PostedAt, Data: data}, nil
}

// entryFor decodes and checks a TransferCompleted event of either version (v1 upcast to kind
// unspecified) and builds its entry by the rule in force for its type and kind at the
// transfer's time.
func entryFor(env contract.Envelope, rules Rules) (Entry, error) {
	data, err := contract.DecodeTransferCompleted(env)
	if err != nil {
		return Entry{}, err
	}
	rule, err := ruleFor(rules, env.ID, env.Type, data.Kind, data.CreatedAt)
	if err != nil {
		return Entry{}, err
	}
	if err := checkNotHoldKey(env.ID, data.TransferID); err != nil {
		return Entry{}, err
	}
	entryID, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:          entryID,
		EventID:     env.ID,
		TransferID:  data.TransferID,
		Currency:    data.Currency,
		Description: transferDescription(data),
		OccurredAt:  data.CreatedAt,
		Lines:       rule.lines(data.Amount),
		EventType:   env.Type,
		Kind:        data.Kind,
	}, nil
}

// transferDescription is the entry's description: the transfer's wallets, and its reference
// when the payer gave one.
func transferDescription(data contract.TransferCompleted) string {
	d := fmt.Sprintf("transfer %s from wallet %s to wallet %s", data.TransferID, data.FromWalletID, data.ToWalletID)
	if data.Reference != "" {
		d += fmt.Sprintf(" (reference %q)", data.Reference)
	}
	return d
}

// log prefers the event-scoped logger the consumer put into ctx, which carries its fields.
func (p *TransferPoster) log(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &p.logger
}
