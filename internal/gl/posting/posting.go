// Package posting is the GL's inbox handler: it turns each batch of the wallet's events into
// journal entries and acknowledges them, in the consumer's transaction. It loads the rules in
// force and the entries a batch refers to through the postgres ledger, asks internal/gl for
// each event's entry, and stores the entries and the acknowledgments.
package posting

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
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
)

// Handler turns each TransferCompleted event into a journal entry, each TransferReversed event
// into an entry reversing its transfer's, each TransferBatchCompleted into one entry of all its
// legs and each TransferBatchReversed into one entry reversing the chosen legs' lines, and each
// hold event into its placement or release,
// and acknowledges them with a TransferPosted.v2 event in the GL's outbox (one per batch), all
// in the consumer's transaction.
type Handler struct {
	ledger  *postgres.Ledger
	rules   *gl.Rules // nil: the ledger's rules table, read once per batch
	holds   gl.HoldRules
	outbox  *outbox.Outbox
	logger  zerolog.Logger
	metrics *metrics.GL
}

var (
	_ inbox.Handler          = (*Handler)(nil)
	_ inbox.DuplicateHandler = (*Handler)(nil)
	_ inbox.Satisfier        = (*Handler)(nil)
)

// New returns the handler for TransferCompleted (v1 and v2), TransferReversed and hold events,
// posting each transfer by the rule in force for its event type, kind and time, read from the
// ledger's rules once per batch, and each hold event by gl.DefaultHoldRules.
func New(ledger *postgres.Ledger, logger zerolog.Logger) *Handler {
	return &Handler{ledger: ledger, holds: gl.DefaultHoldRules, outbox: outbox.New(contract.SourceGL), logger: logger}
}

// WithRules has the handler post transfers by the fixed set r instead of the ledger's rules
// table (for tests and tools that post without one).
func (h *Handler) WithRules(r gl.Rules) *Handler {
	h.rules = &r
	return h
}

// WithHoldRules has the handler post hold events by r instead of gl.DefaultHoldRules. Check r
// against the chart of accounts (gl.HoldRules.Check) before consuming.
func (h *Handler) WithHoldRules(r gl.HoldRules) *Handler {
	h.holds = r
	return h
}

// WithMetrics has the handler record each new posting's time from commit to posting, once its
// transaction has committed.
func (h *Handler) WithMetrics(m *metrics.GL) *Handler {
	h.metrics = m
	return h
}

// PublishOnCommit has the acknowledgments this handler writes published by r, the GL's relay,
// as soon as their transaction commits (outbox.Outbox.PublishOnCommit).
func (h *Handler) PublishOnCommit(r *outbox.Relay) *Handler {
	h.outbox.PublishOnCommit(r)
	return h
}

// Handle posts a batch of new events in a few statements and writes their acknowledgments, all in
// tx, the consumer's transaction. An event that can never be posted (contract.ErrMalformed) or that
// contradicts the posting of its transfer (contract.ErrConflict) fails the batch and writes
// nothing; the consumer then handles each event alone, so the bad one fails alone.
func (h *Handler) Handle(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	return h.post(ctx, tx, envs, false)
}

// HandleDuplicates answers events posted before with a fresh acknowledgment naming the stored
// entry: the wallet re-publishes an event until an acknowledgment of it arrives, so a duplicate
// means the first acknowledgment was lost on the way or never applied. The answer is
// idempotent on the wallet's side.
func (h *Handler) HandleDuplicates(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	return h.post(ctx, tx, envs, true)
}

// Satisfies names what posting env lets a waiting event go on with (gl.Satisfies).
func (h *Handler) Satisfies(env contract.Envelope) []string { return gl.Satisfies(env) }

// batch is one call's events sorted by what posts them, with the entries and postings at the
// events' indexes.
type batch struct {
	envs      []contract.Envelope
	entries   []gl.Entry
	postings  []gl.Posting
	transfers []int // indexes into envs
	reversals []int
	holds     []int
	reversed  map[int]contract.TransferReversed
	// batchReversed are the batch reversals' events, also in reversals.
	batchReversed map[int]contract.TransferBatchReversed
}

func (h *Handler) post(ctx context.Context, tx pgx.Tx, envs []contract.Envelope, answering bool) error {
	b, err := h.prepare(ctx, tx, envs)
	if err != nil {
		return err
	}
	if !answering {
		// A duplicate's entry stands whatever the ledger learnt since; only a first posting
		// is checked.
		if err := h.checkDepositsV1(ctx, tx, envs); err != nil {
			return err
		}
	}
	// Transfers first: a reversal of the batch may reverse one of them.
	if err := h.postSome(ctx, tx, b, b.transfers); err != nil {
		return err
	}
	if err := h.postHolds(ctx, tx, b); err != nil {
		return err
	}
	if len(b.reversals) > 0 {
		if err := h.reversalEntries(ctx, tx, b); err != nil {
			return err
		}
		if err := h.postSome(ctx, tx, b, b.reversals); err != nil {
			return err
		}
	}
	h.observeOnCommit(tx, b.postings)
	for i, posting := range b.postings {
		if err := h.checkPosting(ctx, b.entries[i], posting, answering, envs[i].TraceParent); err != nil {
			return err
		}
	}
	acks, err := acknowledgments(envs, b.entries, b.postings)
	if err != nil {
		return err
	}
	if _, err := h.outbox.AddBatch(ctx, tx, acks); err != nil {
		return fmt.Errorf("acknowledge %d transfers: %w", len(b.entries), err)
	}
	return nil
}

// prepare decodes the batch's events and builds the transfers' entries by the rules in force,
// read once per batch (and not at all for a batch without transfers). Holds and reversals get
// their entries later, from the entries they refer to.
func (h *Handler) prepare(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) (*batch, error) {
	b := &batch{envs: envs, entries: make([]gl.Entry, len(envs)), postings: make([]gl.Posting, len(envs)),
		reversed: map[int]contract.TransferReversed{}, batchReversed: map[int]contract.TransferBatchReversed{}}
	var rules *gl.Rules
	for i, env := range envs {
		if gl.IsHoldEvent(env.Type) {
			b.holds = append(b.holds, i)
			continue
		}
		if env.Type == contract.TypeTransferReversed {
			data, err := gl.DecodeReversal(env)
			if err != nil {
				return nil, err
			}
			b.reversed[i] = data
			b.reversals = append(b.reversals, i)
			continue
		}
		if env.Type == contract.TypeTransferBatchReversed {
			data, err := gl.DecodeBatchReversal(env)
			if err != nil {
				return nil, err
			}
			b.batchReversed[i] = data
			b.reversals = append(b.reversals, i)
			continue
		}
		if rules == nil {
			r, err := h.postingRules(ctx, tx)
			if err != nil {
				return nil, err
			}
			rules = &r
		}
		build := gl.TransferEntry
		if env.Type == contract.TypeTransferBatchCompleted {
			build = gl.BatchEntry
		}
		entry, err := build(env, *rules)
		if err != nil {
			return nil, err
		}
		b.entries[i] = entry
		b.transfers = append(b.transfers, i)
	}
	return b, nil
}

// checkDepositsV1 refuses, as a conflict, a TransferCompleted.v1 of envs the ledger knows is
// not a deposit (gl.CheckDepositV1), reading in tx what the ledger has seen of its wallets.
func (h *Handler) checkDepositsV1(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	ids := gl.DepositV1Wallets(envs)
	if len(ids) == 0 {
		return nil
	}
	seen, err := h.ledger.WalletsSeen(ctx, tx, ids)
	if err != nil {
		return err
	}
	for _, env := range envs {
		if err := gl.CheckDepositV1(env, seen); err != nil {
			return err
		}
	}
	return nil
}

// postingRules are the rules the handler posts transfers by: its fixed set, or the ledger's
// rules read in tx (postgres.Ledger.PostingRules waits for a rule being set to commit).
func (h *Handler) postingRules(ctx context.Context, tx pgx.Tx) (gl.Rules, error) {
	if h.rules != nil {
		return *h.rules, nil
	}
	rules, err := h.ledger.PostingRules(ctx, tx)
	if err != nil {
		return gl.Rules{}, fmt.Errorf("read posting rules: %w", err)
	}
	return rules, nil
}

// postSome posts the entries at indexes idx in one PostBatch and puts their postings at the
// same indexes.
func (h *Handler) postSome(ctx context.Context, tx pgx.Tx, b *batch, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	some := make([]gl.Entry, len(idx))
	for j, i := range idx {
		some[j] = b.entries[i]
	}
	posted, err := h.ledger.PostBatch(ctx, tx, some)
	if errors.Is(err, gl.ErrEventTaken) {
		return contract.Conflict(err)
	}
	if err != nil {
		return fmt.Errorf("post %d movements: %w", len(some), err)
	}
	for j, i := range idx {
		b.postings[i] = posted[j]
	}
	return nil
}

// postHolds posts the batch's hold events: placements first (a release of the batch may
// release one of them), then the releases, each checked against its placement as tx sees it.
func (h *Handler) postHolds(ctx context.Context, tx pgx.Tx, b *batch) error {
	var placed, released []int
	releases := map[int]gl.Release{}
	for _, i := range b.holds {
		if b.envs[i].Type == contract.TypeHoldPlaced {
			entry, err := gl.PlacementEntry(b.envs[i], h.holds)
			if err != nil {
				return err
			}
			b.entries[i] = entry
			placed = append(placed, i)
			continue
		}
		rel, err := gl.DecodeRelease(b.envs[i])
		if err != nil {
			return err
		}
		releases[i] = rel
		released = append(released, i)
	}
	if err := h.postSome(ctx, tx, b, placed); err != nil {
		return err
	}
	if len(released) == 0 {
		return nil
	}
	if err := h.releaseEntries(ctx, tx, b, released, releases); err != nil {
		return err
	}
	return h.postSome(ctx, tx, b, released)
}

// releaseEntries builds the release entries at indexes idx from their placements as tx sees
// them (gl.ReleaseEntry, gl.NoPlacement).
func (h *Handler) releaseEntries(ctx context.Context, tx pgx.Tx, b *batch, idx []int, releases map[int]gl.Release) error {
	keys := make([]string, 0, len(idx))
	for _, i := range idx {
		keys = append(keys, releases[i].PlacedKey())
	}
	placements, err := h.ledger.PostedEntries(ctx, tx, keys)
	if err != nil {
		return fmt.Errorf("find the placements of %d holds: %w", len(keys), err)
	}
	for _, i := range idx {
		rel := releases[i]
		placed, ok := placements[rel.PlacedKey()]
		if !ok {
			return gl.NoPlacement(rel)
		}
		entry, err := gl.ReleaseEntry(rel, placed, h.holds)
		if err != nil {
			return err
		}
		b.entries[i] = entry
	}
	return nil
}

// reversalEntries builds the entries of the batch's reversals and batch reversals from their
// originals' entries, as tx sees them (the batch's own transfers and batches posted already):
// gl.ReversalEntry, gl.BatchReversalEntry; gl.NoOriginal, gl.NoBatch for an original not posted
// yet, gl.LegPosted for a reversal naming a batch's leg.
func (h *Handler) reversalEntries(ctx context.Context, tx pgx.Tx, b *batch) error {
	ids := make([]string, 0, len(b.reversals))
	for _, i := range b.reversals {
		if data, ok := b.batchReversed[i]; ok {
			ids = append(ids, data.BatchID)
			continue
		}
		ids = append(ids, b.reversed[i].TransferID)
	}
	originals, err := h.ledger.PostedEntries(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("find the entries of %d reversed transfers: %w", len(ids), err)
	}
	taken := map[int64]bool{} // lines reversed by this call's batch reversals
	for _, i := range b.reversals {
		if data, ok := b.batchReversed[i]; ok {
			orig, ok := originals[data.BatchID]
			if !ok {
				return gl.NoBatch(b.envs[i].ID, data)
			}
			entry, err := gl.BatchReversalEntry(b.envs[i].ID, data, orig, taken)
			if err != nil {
				return err
			}
			b.entries[i] = entry
			continue
		}
		data := b.reversed[i]
		orig, ok := originals[data.TransferID]
		if !ok {
			return h.noOriginal(ctx, tx, b.envs[i].ID, data)
		}
		entry, err := gl.ReversalEntry(b.envs[i].ID, data, orig)
		if err != nil {
			return err
		}
		b.entries[i] = entry
	}
	return nil
}

// noOriginal is the error of a reversal whose transfer has no entry of its own: a conflict
// when the transfer is a batch's leg (gl.LegPosted), else a wait for it (gl.NoOriginal).
func (h *Handler) noOriginal(ctx context.Context, tx pgx.Tx, eventID string, data contract.TransferReversed) error {
	batches, err := h.ledger.LegEntries(ctx, tx, []string{data.TransferID})
	if err != nil {
		return err
	}
	if key, ok := batches[data.TransferID]; ok {
		return gl.LegPosted(data, key)
	}
	return gl.NoOriginal(eventID, data)
}

// acknowledgments are the TransferPosted.v2 events of a batch: one, or one per
// contract.MaxPostingsPerEvent postings when a batch is larger (EVENTS_BATCH_SIZE has no upper
// bound, and the wallet refuses a longer list). Each continues the trace of its first traced
// event, from the span posting it: that transfer's trace goes on to the wallet's acknowledge span.
func acknowledgments(envs []contract.Envelope, entries []gl.Entry, postings []gl.Posting) ([]outbox.Event, error) {
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
func (h *Handler) observeOnCommit(tx pgx.Tx, postings []gl.Posting) {
	if h.metrics == nil {
		return
	}
	var created []gl.Entry
	for _, posting := range postings {
		if posting.Created {
			created = append(created, posting.Entry)
		}
	}
	if len(created) > 0 {
		database.AfterCommit(tx, func() {
			for _, e := range created {
				h.metrics.Posted(e.OccurredAt, e.PostedAt)
			}
		})
	}
}

// checkPosting refuses, as a conflict, an entry whose movement was posted before with other
// figures or by another event (gl.CheckPosting), and logs an entry the same event posted
// before, past the inbox, acknowledged again. traceParent is the event's trace context, whose
// trace id its log lines carry.
func (h *Handler) checkPosting(ctx context.Context, e gl.Entry, posting gl.Posting, answering bool, traceParent string) error {
	as, err := gl.CheckPosting(e, posting)
	if err != nil {
		return err
	}
	traceID := tracing.TraceIDOf(traceParent)
	switch {
	case as == gl.PostedNew:
	case as == gl.PostedBefore && answering:
		tracing.LogTraceID(h.log(ctx).Debug(), traceID).Str("transfer_id", e.TransferID).Str("event_id", e.EventID).Msg("duplicate of a posted event; acknowledging it again")
	default:
		// The inbox no longer knew the event (its row deleted past EVENTS_INBOX_RETENTION, or
		// gl replay): the journal's unique event and transfer ids kept it from posting twice.
		tracing.LogTraceID(h.log(ctx).Info(), traceID).Str("transfer_id", e.TransferID).Str("event_id", e.EventID).
			Msg("event posted before and unknown to the inbox; acknowledging it again")
	}
	return nil
}

// acknowledgment is the one TransferPosted.v2 event of a batch: each posting, naming the event
// it posted and the stored entry. One event per batch rather than per posting: one outbox row,
// one signature, one message and one wallet inbox row for the whole batch. Its aggregate is the
// batch's first transfer.
func acknowledgment(entries []gl.Entry, postings []gl.Posting) (outbox.Event, error) {
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

// log prefers the event-scoped logger the consumer put into ctx, which carries its fields.
func (h *Handler) log(ctx context.Context) *zerolog.Logger {
	if l := zerolog.Ctx(ctx); l.GetLevel() != zerolog.Disabled {
		return l
	}
	return &h.logger
}
