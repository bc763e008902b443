// Package problem is the one application error type of both services and its single mapping to
// HTTP: RFC 9457 problem details (application/problem+json) with a stable type URI per error.
package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"
)

// Kind classifies an application error; each kind has one HTTP status.
type Kind int

// The kinds of application error.
const (
	Internal      Kind = iota // a bug or an unexpected failure: details stay in the log
	Invalid                   // the request is malformed (400)
	NotFound                  // the thing named does not exist (404)
	Conflict                  // the request clashes with the current state (409)
	TooLarge                  // the body is over the limit (413)
	Unprocessable             // well-formed, but the business rules refuse it (422)
	Unavailable               // a dependency is down; retry later (503)
)

var statuses = map[Kind]int{
	Internal:      http.StatusInternalServerError,
	Invalid:       http.StatusBadRequest,
	NotFound:      http.StatusNotFound,
	Conflict:      http.StatusConflict,
	TooLarge:      http.StatusRequestEntityTooLarge,
	Unprocessable: http.StatusUnprocessableEntity,
	Unavailable:   http.StatusServiceUnavailable,
}

// TypeBase prefixes every problem type; the slug after it is the stable part clients match on.
const TypeBase = "https://walletgl.dev/problems/"

// Error is an application error: a kind, a stable slug (the problem type) and a human detail
// that is safe to show to a client.
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

// Details is the problem+json document.
type Details struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// Write answers r with the problem for err. An error that is not an *Error is internal: it is
// logged with the request's logger and the client sees only a generic detail.
func Write(w http.ResponseWriter, r *http.Request, err error) {
	var appErr *Error
	if !errors.As(err, &appErr) {
		zerolog.Ctx(r.Context()).Error().Err(err).Str("path", r.URL.Path).Msg("request failed")
		appErr = New(Internal, "internal", "the server could not complete the request; it has been logged")
	}
	status := statuses[appErr.Kind]
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Details{
		Type:     TypeBase + appErr.Slug,
		Title:    http.StatusText(status),
		Status:   status,
		Detail:   appErr.Detail,
		Instance: r.URL.Path,
	})
}
