package contract

import (
	"errors"
	"fmt"
)

// ErrMalformed is the reason for an event that can never be processed: it is recorded as
// failed in the inbox and terminated at the broker instead of being redelivered.
var ErrMalformed = errors.New("malformed event")

// Permanent marks err as one that no retry can fix (see ErrMalformed).
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrMalformed, err) }

// ErrConflict is the reason for an event that contradicts what its consumer applied before
// (another event for the same transfer with other figures): forged or corrupted. Like a
// malformed event it is recorded failed, never applied and never acknowledged back.
var ErrConflict = errors.New("conflicting event")

// Conflict marks err as a conflict (see ErrConflict).
func Conflict(err error) error { return fmt.Errorf("%w: %w", ErrConflict, err) }

// ErrUnauthenticated is the reason for an event whose producer could not be verified
// (unsigned, signed with an unknown key, by another service, or not over these bytes): it is
// recorded failed, never applied, never acknowledged back and never retried.
var ErrUnauthenticated = errors.New("unauthenticated event")

// Unauthenticated marks err as ErrUnauthenticated.
func Unauthenticated(err error) error { return fmt.Errorf("%w: %w", ErrUnauthenticated, err) }

// ErrNotYet is the reason for an event that needs another one applied first (a reversal
// whose transfer is not posted yet: the stream does not promise their order across a
// re-publish). The consumer parks it in the inbox (status waiting, its payload kept, the
// message acknowledged) and applies it once what it waits for posts: an event that only waits
// never holds the broker's ack-pending slots and is never recorded failed for it.
var ErrNotYet = errors.New("event waits for another")

// NotYetError is an ErrNotYet that names what the event waits for.
type NotYetError struct {
	WaitsFor string // what must post first: WaitTransfer(id), WaitHold(id)
	Err      error
}

func (e *NotYetError) Error() string {
	return ErrNotYet.Error() + " (" + e.WaitsFor + "): " + e.Err.Error()
}
func (e *NotYetError) Unwrap() []error { return []error{ErrNotYet, e.Err} }

// NotYet marks err as ErrNotYet: the event waits for waitsFor to post (WaitTransfer,
// WaitHold), and is applied once it has.
func NotYet(waitsFor string, err error) error { return &NotYetError{WaitsFor: waitsFor, Err: err} }

// WaitsFor is what a NotYet error waits for ("" when err is none, or names nothing).
func WaitsFor(err error) string {
	if ny, ok := errors.AsType[*NotYetError](err); ok {
		return ny.WaitsFor
	}
	return ""
}

// The keys of what a waiting event waits for (the inbox's waits_for): a transfer's posting,
// which its reversals wait for, and a hold's placement, which its release waits for.
func WaitTransfer(transferID string) string { return "transfer:" + transferID }
func WaitHold(holdID string) string         { return "hold:" + holdID }

// The reasons a failed inbox row gives, one stable word each (the inbox's reason column).
const (
	ReasonMalformed       = "malformed"       // can never be decoded or applied as it is
	ReasonConflict        = "conflict"        // contradicts what was applied before
	ReasonExhausted       = "exhausted"       // the handler ran and failed on MaxDeliver deliveries
	ReasonUnauthenticated = "unauthenticated" // its producer could not be verified
	ReasonAbandoned       = "abandoned"       // it waited for an event an operator says will never come
)

// FailureReasons are the reason words of failed inbox rows.
var FailureReasons = []string{ReasonMalformed, ReasonConflict, ReasonExhausted, ReasonUnauthenticated, ReasonAbandoned}

// Retryable reports whether a retry of a failed event with this reason can succeed: one that
// exhausted its deliveries (the handler's cause may be gone) or that an operator abandoned while
// it waited (what it waited for may have posted since). A malformed, conflicting or
// unauthenticated event fails again the same way on every retry: an operator resolves it instead.
func Retryable(reason string) bool {
	return reason == ReasonExhausted || reason == ReasonAbandoned
}

// FailureReason is the reason word for a permanent failure.
func FailureReason(err error) string {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return ReasonUnauthenticated
	case errors.Is(err, ErrConflict):
		return ReasonConflict
	}
	return ReasonMalformed
}
