package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/problem"
	"walletgl/internal/tracing"
)

// RequestIDHeader carries a request's id both ways: the client's when it sent a sane one, a
// new one otherwise.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an id taken from a client, which every log line of the request carries.
const maxRequestIDLen = 128

// Handler serves mux with what every route of both services shares. Each request gets an id
// (echoed in X-Request-Id) and a logger in its context carrying the id, method and path, for
// the handlers and WriteProblem; each request is logged once, at debug level, with its route
// pattern, status and duration. A request no route matches is answered with a problem instead
// of the mux's plain text, keeping the mux's choice between 404 and 405 and its Allow header.
//
// Each observer hears every answered request (metrics.HTTP.Observe is one).
//
// With tracing on (tr enabled), each request has a server span named by its route pattern, the
// child of the request's traceparent or the root of a new trace, and its logger carries the
// trace_id; with it off, nothing of this is done.
func Handler(logger zerolog.Logger, mux *http.ServeMux, tr *tracing.Provider, observers ...Observer) http.Handler {
	spans := newServerSpans(tr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sent := r.Header.Get(RequestIDHeader)
		id := sent
		if !saneRequestID(id) {
			id = uuid.NewString()
		}
		w.Header().Set(RequestIDHeader, id)
		// A second lookup, which the mux repeats: its Handler method alone tells routed from
		// unrouted and names the pattern, and only its ServeHTTP sets the path values.
		_, route := mux.Handler(r)
		ctx, span := spans.start(r, route)
		reqLogger := tracing.Logger(ctx, logger.With().Str("request_id", id).Str("method", r.Method).Str("path", r.URL.Path).Logger())
		r = r.WithContext(reqLogger.WithContext(ctx))

		rec := &statusRecorder{ResponseWriter: w}
		if sent != "" && id != sent {
			WriteProblem(rec, r, problem.Newf(errInvalidRequestID,
				"the %s header must be 1 to %d printable ASCII characters without spaces", RequestIDHeader, maxRequestIDLen))
		} else if err := refuseEarly(r); err != nil {
			WriteProblem(rec, r, err)
		} else if route == "" {
			mux.ServeHTTP(&unroutedWriter{ResponseWriter: rec, r: r}, r)
		} else {
			mux.ServeHTTP(rec, r)
		}
		// Through the context: handlers may have added fields (transfer_id) to this logger.
		took := time.Since(start)
		zerolog.Ctx(r.Context()).Debug().Str("route", route).Int("status", rec.Status()).
			Float64("duration_ms", float64(took.Microseconds())/1000).Msg("request")
		for _, o := range observers {
			o(route, r.Method, rec.Status(), took)
		}
		endServerSpan(span, rec.Status())
	})
}

// refuseEarly is what no handler is asked to serve: a path or query string holding text
// PostgreSQL cannot store, and a body declared larger than MaxBodyBytes (refused before a byte
// of it is read, so that the client reads the answer rather than a reset).
func refuseEarly(r *http.Request) error {
	if err := checkText(r); err != nil {
		return err
	}
	if r.ContentLength > MaxBodyBytes {
		return problem.Newf(errBodyTooLarge, "the request body declares %d bytes; the limit is %d", r.ContentLength, MaxBodyBytes)
	}
	return nil
}

// Observer hears an answered request: its route pattern ("" when none matched), method,
// status and duration.
type Observer func(route, method string, status int, took time.Duration)

var errInvalidRequestID = problem.New(problem.Invalid, "invalid-request-id", "the X-Request-Id header is not acceptable")

// saneRequestID accepts 1 to maxRequestIDLen printable ASCII characters without spaces:
// anything else could forge or break log lines.
func saneRequestID(s string) bool {
	if s == "" || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// statusRecorder remembers the final status a handler sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 && status >= 200 { // 1xx are interim answers
		s.status = status
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Status is the status sent; a handler that sent nothing has answered 200.
func (s *statusRecorder) Status() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// unroutedWriter turns the mux's plain-text 404 and 405 into problems; the mux has set the
// Allow header of a 405 before it writes the status. Any other answer (a redirect to the
// canonical path) passes through.
type unroutedWriter struct {
	http.ResponseWriter
	r       *http.Request
	wrote   bool
	swallow bool
}

func (u *unroutedWriter) WriteHeader(status int) {
	if u.wrote {
		return
	}
	u.wrote = true
	switch status {
	case http.StatusNotFound:
		u.swallow = true
		writeProblem(u.ResponseWriter, status, newProblem(u.r, status, SlugNotFound,
			fmt.Sprintf("there is nothing at %s", u.r.URL.Path)))
	case http.StatusMethodNotAllowed:
		u.swallow = true
		writeProblem(u.ResponseWriter, status, newProblem(u.r, status, SlugMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; see the Allow header", u.r.Method, u.r.URL.Path)))
	default:
		u.ResponseWriter.WriteHeader(status)
	}
}

func (u *unroutedWriter) Write(b []byte) (int, error) {
	if !u.wrote {
		u.WriteHeader(http.StatusOK)
	}
	if u.swallow {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}
