package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/problem"
)

// logRequests gives each request a logger carrying its id, method and path (in the context,
// for handlers and problem.Write) and logs the request's outcome at debug level.
func logRequests(logger zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		requestID := r.Header.Get("X-Request-Id")
		if !printable(requestID, 128) {
			requestID = uuid.NewString()
		}
		w.Header().Set("X-Request-Id", requestID)
		l := logger.With().Str("request_id", requestID).Str("method", r.Method).Str("path", r.URL.Path).Logger()
		ctx := l.WithContext(r.Context())
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		// Through the context: handlers may have added fields (transfer_id) to this logger.
		zerolog.Ctx(ctx).Debug().Int("status", rec.status).Dur("duration", time.Since(start)).Msg("request")
	})
}

func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	if s.status == 0 {
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

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// problemsForUnrouted answers requests no route matches with a problem instead of the mux's
// plain text, keeping its choice between 404 and 405 (and its Allow header).
func problemsForUnrouted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&unroutedWriter{ResponseWriter: w, r: r}, r)
	})
}

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
		problem.Write(u.ResponseWriter, u.r, problem.New(problem.NotFound, "not-found",
			fmt.Sprintf("there is nothing at %s", u.r.URL.Path)))
	case http.StatusMethodNotAllowed:
		u.swallow = true
		writeMethodNotAllowed(u.ResponseWriter, u.r)
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

// writeMethodNotAllowed writes the problem document by hand: problem has no kind for 405,
// which only routing can produce.
func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_ = json.NewEncoder(w).Encode(problem.Details{
		Type:     problem.TypeBase + "method-not-allowed",
		Title:    http.StatusText(http.StatusMethodNotAllowed),
		Status:   http.StatusMethodNotAllowed,
		Detail:   fmt.Sprintf("%s is not allowed on %s; see the Allow header", r.Method, r.URL.Path),
		Instance: r.URL.Path,
	})
}
