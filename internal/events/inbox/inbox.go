package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
)

// Inbox is one consumer's inbox in its service's database: the claim that lets each event be
// applied once, the handler applied in the claim's transaction, the record of events that
// failed, and an operator's retry of those. The consumer loop, gl inbox retry and gl replay
// all go through it.
type Inbox struct {
	name    string // the consumer's name: every inbox id is "<name>:<event id>"
	handler Handler
}

// New returns the inbox of the consumer called name, applying events with handler.
func New(name string, handler Handler) *Inbox { return &Inbox{name: name, handler: handler} }

// ID is the inbox id of an event: the consumer's name and the event id.
func (in *Inbox) ID(eventID string) string { return in.name + ":" + eventID }

// Inbound is an event as the inbox takes it: its envelope and where it came from.
type Inbound struct {
	Env       contract.Envelope
	EventID   string // the envelope's id, or what stands in for it when the envelope is unusable
	StreamSeq uint64
}

// Apply claims every event in tx (a new one's inbox row is written processed: it commits with
// the handler's writes or not at all), hands the new ones to the handler in one call, and hands events it had processed before to the handler's HandleDuplicates (when
// it has one): all in tx. fresh[i] reports whether events[i] was new; a second copy of an event
// within events is a duplicate.
func (in *Inbox) Apply(ctx context.Context, tx pgx.Tx, events []Inbound) (fresh []bool, err error) {
	q := eventsdb.New(tx)
	params := eventsdb.ClaimInboxBatchParams{Consumer: in.name}
	first := map[string]int{} // inbox id -> index of its first copy
	var copies []string       // inbox ids of further copies within events
	for i, ev := range events {
		id := in.ID(ev.EventID)
		if _, seen := first[id]; seen {
			copies = append(copies, id)
			continue
		}
		first[id] = i
		params.Ids = append(params.Ids, id)
		params.EventIds = append(params.EventIds, ev.EventID)
		params.EventTypes = append(params.EventTypes, ev.Env.Type)
		params.StreamSeqs = append(params.StreamSeqs, int64(ev.StreamSeq))
	}
	rows, err := q.ClaimInboxBatch(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("claim %d inbox rows: %w", len(params.Ids), err)
	}
	if len(copies) > 0 {
		if err := q.CountInboxDuplicates(ctx, copies); err != nil {
			return nil, fmt.Errorf("count %d duplicate copies: %w", len(copies), err)
		}
	}
	fresh = make([]bool, len(events))
	var envs, processedBefore []contract.Envelope
	for _, row := range rows {
		i := first[row.ID]
		switch {
		case row.Inserted: // written processed: it commits with the handler's writes or not at all
			fresh[i] = true
			envs = append(envs, events[i].Env)
		case row.Status == contract.StatusProcessed:
			processedBefore = append(processedBefore, events[i].Env)
		}
	}
	if err := in.apply(ctx, tx, envs); err != nil {
		return nil, err
	}
	if err := in.answerDuplicates(ctx, tx, processedBefore); err != nil {
		return nil, err
	}
	return fresh, nil
}

// apply hands claimed events to the handler.
func (in *Inbox) apply(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	if err := in.handler.Handle(ctx, tx, envs); err != nil {
		return fmt.Errorf("handle %d events: %w", len(envs), err)
	}
	return nil
}

// answerDuplicates hands events processed before to a DuplicateHandler: the producer is
// evidently still waiting for the answer to them.
func (in *Inbox) answerDuplicates(ctx context.Context, tx pgx.Tx, envs []contract.Envelope) error {
	dh, ok := in.handler.(DuplicateHandler)
	if !ok || len(envs) == 0 {
		return nil
	}
	if err := dh.HandleDuplicates(ctx, tx, envs); err != nil {
		return fmt.Errorf("answer %d duplicate events: %w", len(envs), err)
	}
	return nil
}

// Failure is why an event is recorded failed: a reason word (contract.ReasonMalformed, …) and its
// cause.
type Failure struct {
	Reason   string
	Cause    error
	Payload  []byte // the raw message, kept for a retry
	Attempts int32
}

// RecordFailure writes the inbox row of a failed event in db; an event already processed is
// left alone.
func (in *Inbox) RecordFailure(ctx context.Context, db database.Executor, ev Inbound, f Failure) error {
	err := eventsdb.New(db).RecordInboxFailure(ctx, eventsdb.RecordInboxFailureParams{
		ID: in.ID(ev.EventID), Consumer: in.name, EventID: ev.EventID, EventType: eventTypeOr(ev.Env.Type),
		StreamSeq: int64(ev.StreamSeq), Reason: f.Reason, Detail: f.Cause.Error(), Payload: f.Payload,
		Attempts: max(f.Attempts, 1),
	})
	if err != nil {
		return fmt.Errorf("record inbox %s failed: %w", in.ID(ev.EventID), interpretError(err))
	}
	return nil
}

func eventTypeOr(t string) string {
	if t == "" {
		return "unknown"
	}
	return t
}

// Retried is the outcome of retrying one inbox row: Error is empty when it was processed.
type Retried struct {
	ID    string `json:"id"`
	Error string `json:"error,omitempty"`
}

// Retry processes failed or waiting events again from their stored payload, through the
// handler: one transaction per event reclaims the row (failed or waiting → processing), applies
// the event and marks the row processed. An event that fails again (or still waits) is rolled
// back and stays as it was, with the error
// in its outcome. ids are inbox ids ("<consumer>:<event id>") or bare event ids. Nothing is
// retried, not even a deadlock: the operator reads the outcome and runs the command again.
// Events recorded failed as unauthenticated are refused: only verified events are applied.
func (in *Inbox) Retry(ctx context.Context, pool *pgxpool.Pool, ids ...string) []Retried {
	log := zerolog.Ctx(ctx).With().Str("component", "inbox retry").Str("consumer", in.name).Logger()
	out := make([]Retried, 0, len(ids))
	for _, id := range ids {
		if !strings.HasPrefix(id, in.name+":") {
			id = in.ID(id)
		}
		err := database.WithTx(ctx, pool, func(tx pgx.Tx) error { return in.retryOne(ctx, tx, id) })
		r := Retried{ID: id}
		if err != nil {
			r.Error = err.Error()
			log.Warn().Err(err).Str("inbox_id", id).Msg("retried event failed again")
		} else {
			log.Info().Str("inbox_id", id).Msg("retried event processed")
		}
		out = append(out, r)
	}
	return out
}

func (in *Inbox) retryOne(ctx context.Context, tx pgx.Tx, id string) error {
	row, err := eventsdb.New(tx).ReclaimFailedInbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound): // no failed or waiting row with this id
		return notFailed(ctx, tx, id)
	case err != nil:
		return fmt.Errorf("reclaim inbox %s: %w", id, err)
	}
	if row.Reason != nil && *row.Reason == contract.ReasonUnauthenticated {
		// Its signature is not stored, and its producer was never verified: applying it now
		// would apply a forgery. The real event comes again when its producer publishes it.
		return fmt.Errorf("inbox %s failed as unauthenticated: an event whose producer was not verified is never retried; "+
			"a real event is published again by its producer (the wallet's: wallet outbox republish)", id)
	}
	return in.applyStored(ctx, tx, row)
}

// applyStored applies a reclaimed row's stored payload and marks the row processed, in tx.
func (in *Inbox) applyStored(ctx context.Context, tx pgx.Tx, row eventsdb.Inbox) error {
	id := row.ID
	if len(row.Payload) == 0 {
		return fmt.Errorf("inbox %s has no stored payload to process", id)
	}
	env, err := contract.DecodeEnvelope(row.Payload)
	if err == nil {
		err = expectType(env, row.EventType)
	}
	if err != nil {
		return fmt.Errorf("decode inbox %s: %w", id, err)
	}
	if err := in.apply(ctx, tx, []contract.Envelope{env}); err != nil {
		return err
	}
	if _, err := eventsdb.New(tx).MarkInboxProcessedBatch(ctx, []string{id}); err != nil {
		return fmt.Errorf("mark inbox %s processed: %w", id, err)
	}
	return nil
}

// Waiting is an event parked in the inbox: what it waits for, why, and its verified message.
type Waiting struct {
	WaitsFor string // WaitTransfer(id), WaitHold(id)
	Cause    error
	Payload  []byte
	Attempts int32
}

// RecordWaiting parks ev in db as waiting for w.WaitsFor, with its payload to apply later; an
// event processed or failed meanwhile is left alone.
func (in *Inbox) RecordWaiting(ctx context.Context, db database.Executor, ev Inbound, w Waiting) error {
	err := eventsdb.New(db).RecordInboxWaiting(ctx, eventsdb.RecordInboxWaitingParams{
		ID: in.ID(ev.EventID), Consumer: in.name, EventID: ev.EventID, EventType: eventTypeOr(ev.Env.Type),
		StreamSeq: int64(ev.StreamSeq), WaitsFor: w.WaitsFor, Detail: w.Cause.Error(), Payload: w.Payload,
		Attempts: max(w.Attempts, 1),
	})
	if err != nil {
		return fmt.Errorf("record inbox %s waiting: %w", in.ID(ev.EventID), interpretError(err))
	}
	return nil
}

// maxWaitingPass bounds the waiting events one pass over all of them tries (the operator API's
// listing limit).
const maxWaitingPass = 1000

// WaitingFor returns the ids of the events waiting for one of keys, oldest first; no keys
// means the oldest waiting events, up to maxWaitingPass, whatever they wait for.
func (in *Inbox) WaitingFor(ctx context.Context, db database.Executor, keys []string) ([]string, error) {
	q := eventsdb.New(db)
	var ids []string
	var err error
	if len(keys) == 0 {
		ids, err = q.WaitingInbox(ctx, eventsdb.WaitingInboxParams{Consumer: in.name, RowLimit: maxWaitingPass})
	} else {
		ids, err = q.WaitingInboxFor(ctx, eventsdb.WaitingInboxForParams{Consumer: in.name, Keys: keys})
	}
	if err != nil {
		return nil, fmt.Errorf("find waiting inbox rows: %w", interpretError(err))
	}
	return ids, nil
}

// WaitingSummary is how many events of the inbox wait, and since when the oldest does.
type WaitingSummary struct {
	Count  int64
	Oldest time.Time // the oldest one's arrival; zero when none waits
}

// Waiting counts the consumer's waiting events (from the partial index alone).
func (in *Inbox) Waiting(ctx context.Context, db database.Executor) (WaitingSummary, error) {
	r, err := eventsdb.New(db).InboxWaitingSummary(ctx, in.name)
	if err != nil {
		return WaitingSummary{}, fmt.Errorf("count waiting inbox rows: %w", interpretError(err))
	}
	if r.Count == 0 {
		return WaitingSummary{}, nil
	}
	return WaitingSummary{Count: r.Count, Oldest: r.Oldest}, nil
}

// ApplyWaiting applies the waiting event id from its stored payload, in one transaction of
// its own: it reclaims the row (skipping one another transaction holds), applies the event
// and marks it processed. applied is false when the row was no longer waiting or was held,
// and when the event still waits (rolled back: it stays waiting). Any other error is
// returned; the row stays waiting.
func (in *Inbox) ApplyWaiting(ctx context.Context, pool *pgxpool.Pool, id string) (applied bool, err error) {
	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		row, err := eventsdb.New(tx).ReclaimWaitingInbox(ctx, id)
		switch err := interpretError(err); {
		case errors.Is(err, contract.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("reclaim waiting inbox %s: %w", id, err)
		}
		if err := in.applyStored(ctx, tx, row); err != nil {
			return err
		}
		applied = true
		return nil
	})
	switch {
	case errors.Is(err, contract.ErrNotYet):
		return false, nil
	case errors.Is(err, contract.ErrMalformed) || errors.Is(err, contract.ErrConflict):
		// What it waited for posted, and the event contradicts it: failed for good.
		if ferr := in.failWaiting(ctx, pool, id, err); ferr != nil {
			return false, ferr
		}
		return false, err
	case err != nil:
		return false, err
	}
	return applied, nil
}

// failWaiting records the waiting event id failed for cause, payload kept.
func (in *Inbox) failWaiting(ctx context.Context, pool *pgxpool.Pool, id string, cause error) error {
	row, err := eventsdb.New(pool).GetInbox(ctx, id)
	if err != nil {
		return fmt.Errorf("get inbox %s: %w", id, interpretError(err))
	}
	ev := Inbound{EventID: row.EventID, Env: contract.Envelope{Type: row.EventType}}
	if row.StreamSeq != nil {
		ev.StreamSeq = uint64(*row.StreamSeq)
	}
	return in.RecordFailure(ctx, pool, ev, Failure{Reason: contract.FailureReason(cause), Cause: cause, Payload: row.Payload, Attempts: row.Attempts})
}

// Abandon gives up on waiting events for an operator: each is failed with the reason
// abandoned and its payload kept (inbox retry still applies it). ids are inbox ids or bare
// event ids; a row that is not waiting is refused in its outcome.
func (in *Inbox) Abandon(ctx context.Context, pool *pgxpool.Pool, ids ...string) []Retried {
	log := zerolog.Ctx(ctx).With().Str("component", "inbox abandon").Str("consumer", in.name).Logger()
	out := make([]Retried, 0, len(ids))
	for _, id := range ids {
		if !strings.HasPrefix(id, in.name+":") {
			id = in.ID(id)
		}
		r := Retried{ID: id}
		row, err := eventsdb.New(pool).AbandonWaitingInbox(ctx, eventsdb.AbandonWaitingInboxParams{
			ID: id, Detail: "abandoned by an operator while waiting",
		})
		switch err := interpretError(err); {
		case errors.Is(err, contract.ErrNotFound):
			r.Error = notWaiting(ctx, pool, id).Error()
		case err != nil:
			r.Error = fmt.Errorf("abandon inbox %s: %w", id, err).Error()
		default:
			log.Info().Str("inbox_id", id).Str("waits_for", deref(row.WaitsFor)).Msg("waiting event abandoned")
		}
		out = append(out, r)
	}
	return out
}

// notWaiting explains why an inbox row could not be abandoned.
func notWaiting(ctx context.Context, db database.Executor, id string) error {
	row, err := eventsdb.New(db).GetInbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound):
		return fmt.Errorf("inbox %s: %w", id, err)
	case err != nil:
		return fmt.Errorf("get inbox %s: %w", id, err)
	}
	return fmt.Errorf("inbox %s is %s, only a waiting event is abandoned: %w", id, row.Status, contract.ErrInvalidStatus)
}

// notFailed explains why an inbox row could not be reclaimed for a retry.
func notFailed(ctx context.Context, db database.Executor, id string) error {
	row, err := eventsdb.New(db).GetInbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound):
		return fmt.Errorf("inbox %s: %w", id, err)
	case err != nil:
		return fmt.Errorf("get inbox %s: %w", id, err)
	}
	return fmt.Errorf("inbox %s is %s, only a failed or waiting event is retried: %w", id, row.Status, contract.ErrInvalidStatus)
}

// expectType refuses, for good, an event of a type this consumer does not handle.
func (c *Consumer) expectType(env contract.Envelope) error {
	if !c.cfg.Takes(env.Type) {
		return contract.Permanent(fmt.Errorf("unexpected event type %q", env.Type))
	}
	return nil
}

// expectType refuses, for good, an event whose type is not want.
func expectType(env contract.Envelope, want string) error {
	if env.Type != want {
		return contract.Permanent(fmt.Errorf("unexpected event type %q", env.Type))
	}
	return nil
}

// interpretError is the one place where the inbox reads a database error, and the edge where
// it becomes an error of the contract: no row is contract.ErrNotFound, a database that cannot
// be reached is contract.ErrUnavailable (its cause kept); anything else is returned unchanged.
func interpretError(err error) error {
	return database.Interpret(err, contract.ErrNotFound, contract.ErrUnavailable)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
