package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
)

// Event is what a service writes to its outbox inside its business transaction.
type Event struct {
	ID          uuid.UUID // the message id (Nats-Msg-Id) and the inbox key of every consumer
	Type        string
	AggregateID string // what the event is about, e.g. the transfer id
	Time        time.Time
	Data        any
	// TraceParent is the W3C traceparent of the span that wrote the event (tracing.TraceParent),
	// stored in the row's trace_context; the relay's publish span continues it. Empty: untraced.
	TraceParent string
}

// Outbox writes a service's events into its outbox table.
type Outbox struct {
	source string
	relay  *Relay // publishes the rows right after their transaction commits (nil: claims find them)
}

// New returns the outbox of the service named source (contract.SourceWallet or contract.SourceGL).
func New(source string) *Outbox { return &Outbox{source: source} }

// PublishOnCommit makes the outbox write its rows already claimed by r, the relay of this
// process, and hand them to r as soon as their transaction commits: an event is published
// without waiting for a NOTIFY and a claim. It applies to transactions database.WithTx or
// WithTxV began on a pool while r runs, its broker is connected and its hand-off queue has
// room; otherwise rows are written pending, for any relay to claim. Call it before the outbox
// is used.
func (o *Outbox) PublishOnCommit(r *Relay) *Outbox {
	o.relay = r
	return o
}

// Add writes ev in db, which must be the caller's transaction so that the event commits or
// rolls back with the business change. It returns the status the row was written with:
// pending, or dispatching when the row is published on commit.
func (o *Outbox) Add(ctx context.Context, db database.Executor, ev Event) (string, error) {
	return o.AddBatch(ctx, db, []Event{ev})
}

// AddBatch writes evs in one statement, in the caller's transaction as for Add, and returns the
// status the rows were written with.
func (o *Outbox) AddBatch(ctx context.Context, db database.Executor, evs []Event) (string, error) {
	if len(evs) == 0 {
		return contract.StatusPending, nil
	}
	p := eventsdb.InsertOutboxBatchParams{
		Ids:           make([]uuid.UUID, len(evs)),
		EventTypes:    make([]string, len(evs)),
		AggregateIds:  make([]string, len(evs)),
		Payloads:      make([]json.RawMessage, len(evs)),
		TraceContexts: make([]string, len(evs)),
	}
	for i, ev := range evs {
		body, err := o.envelope(ev)
		if err != nil {
			return "", err
		}
		p.Ids[i], p.EventTypes[i], p.AggregateIds[i], p.Payloads[i] = ev.ID, ev.Type, ev.AggregateID, body
		p.TraceContexts[i] = ev.TraceParent
	}
	status, n, err := o.insert(ctx, db, p)
	if err != nil {
		return "", fmt.Errorf("insert %d outbox rows: %w", len(evs), err)
	}
	if n != int64(len(evs)) {
		return "", fmt.Errorf("insert %d outbox rows: %d inserted", len(evs), n)
	}
	return status, nil
}

// insert writes the rows claimed by the relay when it can take them after the commit, and
// pending otherwise.
func (o *Outbox) insert(ctx context.Context, db database.Executor, p eventsdb.InsertOutboxBatchParams) (string, int64, error) {
	q := eventsdb.New(db)
	var claim handOffClaim
	if o.relay != nil {
		claim = o.relay.handOffClaim(len(p.Ids))
	}
	if !claim.ok {
		n, err := q.InsertOutboxBatch(ctx, p)
		return contract.StatusPending, n, err
	}
	rows := make([]claimedRow, len(p.Ids))
	for i := range rows {
		rows[i] = claimedRow{id: p.Ids[i], eventType: p.EventTypes[i], payload: p.Payloads[i], attempts: 1, traceParent: p.TraceContexts[i]}
	}
	if !database.AfterCommit(db, func() { o.relay.handOff(rows) }) {
		n, err := q.InsertOutboxBatch(ctx, p)
		return contract.StatusPending, n, err
	}
	n, err := q.InsertOutboxBatchClaimed(ctx, eventsdb.InsertOutboxBatchClaimedParams{
		Ids: p.Ids, EventTypes: p.EventTypes, AggregateIds: p.AggregateIds, Payloads: p.Payloads, TraceContexts: p.TraceContexts,
		Owner: claim.owner, LeaseSeconds: claim.lease.Seconds(),
	})
	return contract.StatusDispatching, n, err
}

// envelope is the outbox payload of ev: the CloudEvents envelope the relay publishes as is.
func (o *Outbox) envelope(ev Event) ([]byte, error) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("encode %s data: %w", ev.Type, err)
	}
	body, err := json.Marshal(contract.Envelope{
		SpecVersion:     "1.0",
		ID:              ev.ID.String(),
		Source:          o.source,
		Type:            ev.Type,
		Subject:         ev.AggregateID,
		Time:            ev.Time.UTC(),
		DataContentType: "application/json",
		Data:            data,
	})
	if err != nil {
		return nil, fmt.Errorf("encode %s envelope: %w", ev.Type, err)
	}
	return body, nil
}

// Acknowledge moves the outbox rows with these ids to acknowledged: their consumer committed
// their effect. Rows already acknowledged are left alone; it returns how many moved.
func (o *Outbox) Acknowledge(ctx context.Context, db database.Executor, ids ...uuid.UUID) (int64, error) {
	n, err := eventsdb.New(db).AcknowledgeOutbox(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("acknowledge outbox %v: %w", ids, err)
	}
	return n, nil
}

// Restored is what Outbox.Restore did with the events it was given.
type Restored struct {
	Created     int64 // rows the outbox no longer held, written again pending
	Republished int64 // acknowledged rows sent back to pending
	Left        int64 // rows on their way (pending, dispatching, dispatched, failed, dead_letter), left as they are
}

// Restore has evs published again under their own ids, which consumers' inboxes recognise:
// the events of an operator's rebuild, re-created from the service's own tables (wallet outbox
// rebuild). An event whose row retention deleted is written again pending, an acknowledged row
// goes back to pending (as RepublishOutbox), any other row is left on its way. Rows are written
// untraced and never claimed on commit. db must be a transaction: the move of acknowledged rows
// is allowed only inside the transaction that asks for it (db/schema/events/00005).
func (o *Outbox) Restore(ctx context.Context, tx database.Executor, evs []Event) (Restored, error) {
	var out Restored
	if len(evs) == 0 {
		return out, nil
	}
	p := eventsdb.RestoreOutboxBatchParams{
		Ids:          make([]uuid.UUID, len(evs)),
		EventTypes:   make([]string, len(evs)),
		AggregateIds: make([]string, len(evs)),
		Payloads:     make([]json.RawMessage, len(evs)),
	}
	for i, ev := range evs {
		body, err := o.envelope(ev)
		if err != nil {
			return out, err
		}
		p.Ids[i], p.EventTypes[i], p.AggregateIds[i], p.Payloads[i] = ev.ID, ev.Type, ev.AggregateID, body
	}
	q := eventsdb.New(tx)
	// Acknowledged rows first, locked: retention cannot delete one between this move and the
	// insert, which would then skip it.
	if err := q.AllowOutboxRepublish(ctx); err != nil {
		return out, fmt.Errorf("restore outbox rows: allow the transition: %w", err)
	}
	moved, err := q.RepublishOutboxIDs(ctx, p.Ids)
	if err != nil {
		return out, fmt.Errorf("restore outbox rows: move acknowledged rows to pending: %w", err)
	}
	created, err := q.RestoreOutboxBatch(ctx, p)
	if err != nil {
		return out, fmt.Errorf("restore outbox rows: insert %d rows: %w", len(evs), err)
	}
	if len(moved) > 0 {
		if err := q.NotifyOutboxRelays(ctx); err != nil {
			return out, fmt.Errorf("restore outbox rows: notify the relays: %w", err)
		}
	}
	out.Created, out.Republished = int64(len(created)), int64(len(moved))
	out.Left = int64(len(evs)) - out.Created - out.Republished
	return out, nil
}
