// Package web is the HTTP plumbing both services share: a request id and a request-scoped
// logger on every request, one log line per request, strict JSON decoding and encoding, the
// health check, and every error — the services' own, unknown routes, wrong methods, bodies
// that do not parse, a failing health check — as an RFC 9457 problem. It is the one place that
// maps the kinds of problem.Error to HTTP statuses; the domain packages never see net/http.
package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/problem"
)

// ContentTypeProblem is the media type of every error answer.
const ContentTypeProblem = "application/problem+json"

// TypeBase prefixes every problem type; the slug after it is the stable part clients match on.
const TypeBase = "https://walletgl.dev/problems/"

// Slugs of the problems the plumbing answers with itself.
const (
	SlugNotFound         = "not-found"
	SlugMethodNotAllowed = "method-not-allowed"
	SlugUnavailable      = "unavailable"
	SlugInternal         = "internal"
)

// Problem is the problem details document.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

// statuses is the one mapping of application error kinds to HTTP statuses.
var statuses = map[problem.Kind]int{
	problem.Internal:      http.StatusInternalServerError,
	problem.Invalid:       http.StatusBadRequest,
	problem.NotFound:      http.StatusNotFound,
	problem.Conflict:      http.StatusConflict,
	problem.TooLarge:      http.StatusRequestEntityTooLarge,
	problem.Unprocessable: http.StatusUnprocessableEntity,
	problem.Unavailable:   http.StatusServiceUnavailable,

	problem.UnsupportedMediaType: http.StatusUnsupportedMediaType,
	problem.Unauthenticated:      http.StatusUnauthorized,
	problem.Forbidden:            http.StatusForbidden,
	problem.TooManyRequests:      http.StatusTooManyRequests,
	problem.Misdirected:          http.StatusMisdirectedRequest,
}

var errInternal = problem.New(problem.Internal, SlugInternal,
	"the server could not complete the request; it has been logged")

// WriteProblem answers r with the problem for err. Only a *problem.Error's slug and detail
// reach the client. Anything else is internal: logged with the request's logger, answered 500
// with a generic detail. An unavailable dependency is logged too, since its cause (the
// driver's error, naming host, user and database) stays out of the answer.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	status, doc := ProblemOf(r, err)
	writeProblem(w, status, doc)
}

// ProblemOf is the answer WriteProblem gives for err, its status and document, logged as
// WriteProblem logs it: for a handler that answers in another form (the console's HTML).
func ProblemOf(r *http.Request, err error) (int, Problem) {
	log := zerolog.Ctx(r.Context())
	var appErr *problem.Error
	if !errors.As(err, &appErr) {
		appErr = errInternal
	}
	status, ok := statuses[appErr.Kind]
	if !ok {
		appErr, status = errInternal, http.StatusInternalServerError
	}
	switch appErr.Kind {
	case problem.Internal:
		log.Error().Err(err).Msg("request failed")
	case problem.Unavailable:
		log.Warn().Err(err).Msg("dependency unavailable")
	default:
		// A refused request, with the reason its client was given.
		log.Info().Int("status", status).Str("problem", appErr.Slug).Str("detail", appErr.Detail).Msg("request refused")
	}
	return status, newProblem(r, status, appErr.Slug, appErr.Detail)
}

func newProblem(r *http.Request, status int, slug, detail string) Problem {
	return Problem{
		Type:     TypeBase + slug,
		Title:    http.StatusText(status),
		Status:   status,
		Detail:   detail,
		Instance: r.URL.Path,
	}
}

// UnavailableRetryAfter is the Retry-After, in seconds, of every 503: a database failing over
// or a broker away is back within seconds, and a request replayed with its Idempotency-Key
// cannot be applied twice.
const UnavailableRetryAfter = "1"

// writeProblem sends doc, a Problem or a struct embedding one, as the answer; a 503 says when
// to try again (UnavailableRetryAfter) unless the handler said it already.
func writeProblem(w http.ResponseWriter, status int, doc any) {
	w.Header().Set("Content-Type", ContentTypeProblem)
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", UnavailableRetryAfter)
	}
	w.WriteHeader(status)
	// The status is sent; a client that went away is not worth an error.
	_ = json.NewEncoder(w).Encode(doc)
}
