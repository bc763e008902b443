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
