// Package httpapi is the GL's read-only HTTP API: journal entries (by transfer, by event, by
// posting time), account balances (also as of a time) and statements, and the trial balance,
// plus the health check. Errors are problem+json.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/gl"
	"walletgl/internal/problem"
)

// NewServer returns the GL's HTTP handler. health reports whether the service can do its work
// (the database answers); its error text becomes the detail of the 503.
func NewServer(logger zerolog.Logger, ledger gl.Reader, health func(ctx context.Context) error) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, ledger, health)
	var handler http.Handler = mux
	handler = withRequestLogger(logger, handler)
	return handler
}

// withRequestLogger puts a logger carrying the request's id, method and path into the context,
// for the handlers and problem.Write, and logs each request at debug.
func withRequestLogger(logger zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		requestID := r.Header.Get("X-Request-Id")
		if requestID == "" || len(requestID) > 128 {
			requestID = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", requestID)
		reqLogger := logger.With().Str("request_id", requestID).Str("method", r.Method).Str("path", r.URL.Path).Logger()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r.WithContext(reqLogger.WithContext(r.Context())))
		reqLogger.Debug().Int("status", rec.status).Dur("duration", time.Since(start)).Msg("request")
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// encode writes v as the JSON response body.
func encode(w http.ResponseWriter, r *http.Request, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		zerolog.Ctx(r.Context()).Warn().Err(err).Msg("write response")
	}
}

// fail answers with the problem for err. problem.Write logs internal errors; a dependency that
// is down is logged here, since its cause never reaches the client.
func fail(w http.ResponseWriter, r *http.Request, err error) {
	var appErr *problem.Error
	if errors.As(err, &appErr) && appErr.Kind == problem.Unavailable {
		zerolog.Ctx(r.Context()).Warn().Err(err).Msg("dependency unavailable")
	}
	problem.Write(w, r, err)
}
