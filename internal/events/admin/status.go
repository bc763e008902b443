package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"walletgl/internal/events/internal/eventsdb"
)

// OutboxError is the newest publish error of an outbox: a row the broker refused, failed
// (retried after a backoff) or dead_letter (waiting for an operator).
type OutboxError struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
	Error  string    `json:"error"`
	At     time.Time `json:"at"` // when the row last changed status: its failed publish
}

// InboxFailure is the newest event an inbox recorded failed.
type InboxFailure struct {
	ID        string    `json:"id"`
	EventType string    `json:"event_type"`
	Reason    string    `json:"reason"` // malformed, conflict, exhausted, unauthenticated
	Detail    string    `json:"detail"`
	At        time.Time `json:"at"`
}

// LastOutboxError returns the newest publish error among the failed and dead_letter rows, or nil
// when there is none.
func (a *Admin) LastOutboxError(ctx context.Context) (*OutboxError, error) {
	r, err := eventsdb.New(a.db).LastOutboxError(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the last outbox error: %w", interpretError(err))
	}
	return &OutboxError{ID: r.ID, Status: r.Status, Error: r.LastError, At: r.UpdatedAt.UTC()}, nil
}

// LastInboxFailure returns the newest failed inbox row, or nil when there is none.
func (a *Admin) LastInboxFailure(ctx context.Context) (*InboxFailure, error) {
	r, err := eventsdb.New(a.db).LastInboxFailure(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the last inbox failure: %w", interpretError(err))
	}
	return &InboxFailure{ID: r.ID, EventType: r.EventType, Reason: r.Reason, Detail: r.Detail, At: r.UpdatedAt.UTC()}, nil
}

// Health is the verdict the console's header shows on every page: the rows that need a look,
// each counted up to HealthCap.
type Health struct {
	OutboxFailed     Count // refused by the broker, retried after a backoff
	OutboxDeadLetter Count // refused EVENTS_MAX_ATTEMPTS times: waiting for an operator
	InboxFailed      Count // the inbox's dead letters: failed with a reason word
	InboxWaiting     Count // parked until what they wait for posts
}

// Count is a number of rows counted up to a cap: AtLeast says there may be more than N.
type Count struct {
	N       int64
	AtLeast bool
}

// String is the count as shown: "3", or "1000+" at the cap.
func (c Count) String() string {
	if c.AtLeast {
		return fmt.Sprintf("%d+", c.N)
	}
	return fmt.Sprint(c.N)
}

// HealthCap bounds each of Health's counts: past it the header says "at least", and the page
// of those rows has the rest.
const HealthCap = 1000

// Health counts the rows of the verdict, each through its status's partial index and at most
// HealthCap of them.
func (a *Admin) Health(ctx context.Context) (Health, error) {
	r, err := eventsdb.New(a.db).EventsHealth(ctx, HealthCap)
	if err != nil {
		return Health{}, fmt.Errorf("count the rows that need a look: %w", interpretError(err))
	}
	capped := func(n int64) Count { return Count{N: n, AtLeast: n >= HealthCap} }
	return Health{
		OutboxFailed: capped(r.OutboxFailed), OutboxDeadLetter: capped(r.OutboxDeadLetter),
		InboxFailed: capped(r.InboxFailed), InboxWaiting: capped(r.InboxWaiting),
	}, nil
}

// InboxFailed counts the inbox's failed events (resolved ones are not failed) through their
// partial index, at most HealthCap of them: what the metrics read at every scrape.
func (a *Admin) InboxFailed(ctx context.Context) (int64, error) {
	n, err := eventsdb.New(a.db).InboxFailedCount(ctx, HealthCap)
	if err != nil {
		return 0, fmt.Errorf("count failed inbox events: %w", interpretError(err))
	}
	return n, nil
}
