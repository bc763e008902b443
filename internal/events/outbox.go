package events

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/events/eventsdb"
)

// Event is what a service writes to its outbox inside its business transaction.
type Event struct {
	ID          uuid.UUID // the message id (Nats-Msg-Id) and the inbox key of every consumer
	Type        string
	AggregateID string // what the event is about, e.g. the transfer id
	Time        time.Time
	Data        any
}

// Outbox writes a service's events into its outbox table.
type Outbox struct {
	source string
}

// NewOutbox returns the outbox of the service named source (SourceWallet or SourceGL).
func NewOutbox(source string) *Outbox { return &Outbox{source: source} }

// Add inserts ev as a pending outbox row using db, which must be the caller's transaction so
// that the event commits or rolls back with the business change.
func (o *Outbox) Add(ctx context.Context, db eventsdb.DBTX, ev Event) error {
	body, err := o.envelope(ev)
	if err != nil {
		return err
	}
	err = eventsdb.New(db).InsertOutbox(ctx, eventsdb.InsertOutboxParams{
		ID: ev.ID, EventType: ev.Type, AggregateID: ev.AggregateID, Payload: body,
	})
	if err != nil {
		return fmt.Errorf("insert outbox %s: %w", ev.ID, err)
	}
	return nil
}

// AddBatch inserts evs as pending outbox rows in one statement, with the same envelopes Add
// writes; db must be the caller's transaction, as for Add.
func (o *Outbox) AddBatch(ctx context.Context, db eventsdb.DBTX, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	p := eventsdb.InsertOutboxBatchParams{
		Ids:          make([]uuid.UUID, len(evs)),
		EventTypes:   make([]string, len(evs)),
		AggregateIds: make([]string, len(evs)),
		Payloads:     make([]json.RawMessage, len(evs)),
	}
	for i, ev := range evs {
		body, err := o.envelope(ev)
		if err != nil {
			return err
		}
		p.Ids[i], p.EventTypes[i], p.AggregateIds[i], p.Payloads[i] = ev.ID, ev.Type, ev.AggregateID, body
	}
	n, err := eventsdb.New(db).InsertOutboxBatch(ctx, p)
	if err != nil {
		return fmt.Errorf("insert %d outbox rows: %w", len(evs), err)
	}
	if n != int64(len(evs)) {
		return fmt.Errorf("insert %d outbox rows: %d inserted", len(evs), n)
	}
	return nil
}

// envelope is the outbox payload of ev: the CloudEvents envelope the relay publishes as is.
func (o *Outbox) envelope(ev Event) ([]byte, error) {
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("encode %s data: %w", ev.Type, err)
	}
	body, err := json.Marshal(Envelope{
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
func (o *Outbox) Acknowledge(ctx context.Context, db eventsdb.DBTX, ids ...uuid.UUID) (int64, error) {
	n, err := eventsdb.New(db).AcknowledgeOutbox(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("acknowledge outbox %v: %w", ids, err)
	}
	return n, nil
}
