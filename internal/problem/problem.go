// Package problem is the one application error type of both services: a kind, a stable slug
// and a detail safe to show to a client. It knows nothing of HTTP; package web maps the kinds
// to statuses and writes the errors as RFC 9457 problem details.
package problem

import (
	"errors"
	"fmt"
)

// Kind classifies an application error; each kind has one HTTP status, chosen by package web.
type Kind int

// The kinds of application error.
const (
	Internal             Kind = iota // a bug or an unexpected failure: details stay in the log
	Invalid                          // the request is malformed
	NotFound                         // the thing named does not exist
	Conflict                         // the request clashes with the current state
	TooLarge                         // the request is over a size limit
	Unprocessable                    // well-formed, but the business rules refuse it
	Unavailable                      // a dependency is down; retry later
	UnsupportedMediaType             // the request body is not of the media type the API takes
	Unauthenticated                  // no valid credentials came with the request
	Forbidden                        // the credentials do not allow this request
	TooManyRequests                  // the caller is over its rate limit; retry later
	Misdirected                      // the request names a host this server does not answer for
)

// Error is an application error: a kind, a stable slug (the problem type clients match on)
// and a human detail that is safe to show to a client.
type Error struct {
	Kind   Kind
	Slug   string
	Detail string
}

func (e *Error) Error() string { return e.Slug + ": " + e.Detail }

// Is makes errors.Is match two errors with the same slug, so sentinel errors can carry details.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Slug == e.Slug
}

// New returns an application error.
func New(kind Kind, slug, detail string) *Error {
	return &Error{Kind: kind, Slug: slug, Detail: detail}
}

// Newf returns an application error like sentinel with a formatted detail.
func Newf(sentinel *Error, format string, args ...any) *Error {
	return &Error{Kind: sentinel.Kind, Slug: sentinel.Slug, Detail: fmt.Sprintf(format, args...)}
}
