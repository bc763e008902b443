package contract

import "errors"

// The outbox statuses a new row is written with: pending (any relay claims it) or dispatching
// (claimed by the writing process's relay, which publishes it on commit).
const (
	StatusPending     = "pending"
	StatusDispatching = "dispatching"
)

// The inbox statuses the consumer and the operator act on: processed, an event applied once and
// for all; waiting, an event parked until what it waits for posts (its waits_for); failed, an
// event recorded with its reason; resolved, a failed event an operator closed with a reason of
// their own, never applied.
const (
	StatusProcessed = "processed"
	StatusWaiting   = "waiting"
	StatusFailed    = "failed"
	StatusResolved  = "resolved"
)

// The statuses of an outbox row and of an inbox row, in the order of their lifecycle.
var (
	OutboxStatuses = []string{StatusPending, StatusDispatching, "dispatched", "acknowledged", "failed", "dead_letter"}
	InboxStatuses  = []string{"processing", StatusWaiting, StatusProcessed, StatusFailed, "duplicate", StatusResolved}
	// RequeueStatuses are the statuses an operator may send back to pending.
	RequeueStatuses = []string{"failed", "dead_letter"}
)

// Errors of the operator API and of the inbox; callers turn them into their own application
// errors.
var (
	ErrNotFound      = errors.New("not found")
	ErrInvalidStatus = errors.New("invalid status")
	// ErrUnavailable: the database could not be reached or went away; retry later. The
	// driver's error stays wrapped with it (database.IsTransient still reads it).
	ErrUnavailable = errors.New("database unavailable")
)
