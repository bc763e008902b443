package web

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Check is one dependency a service needs to do its work.
type Check struct {
	// Name is public: it names the dependency in the "checks" of a 503.
	Name string
	// Func reports why the dependency cannot be used now; its error is logged, never shown.
	Func func(ctx context.Context) error
	// Warn makes the check a warning: when it fails the service still answers 200, and the
	// check shows as "warning". For conditions worth an alert that do not stop the service
	// doing its work (and that someone outside could cause at will).
	Warn bool
}

// healthTimeout bounds one health request: a dependency that does not answer by then is down.
const healthTimeout = 2 * time.Second

// The fixed public outcomes of a health check, for the service and for each dependency.
const (
	healthOK          = "ok"
	healthUnavailable = "unavailable"
	healthWarning     = "warning"
)

// Health answers GET /healthz: 200 {"status":"ok"} when every check passes, otherwise a 503
// problem "unavailable" with a fixed detail and "checks" saying which dependency is down. A
// failing warning check (Check.Warn) leaves the answer 200, with "checks" naming it "warning".
// The checks' errors (a driver's error names host, user and database) go to the log only.
func Health(checks ...Check) http.Handler {
	type healthy struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks,omitempty"`
	}
	type unhealthy struct {
		Problem
		Checks map[string]string `json:"checks"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		errs := make([]error, len(checks))
		var wg sync.WaitGroup
		for i, c := range checks {
			wg.Go(func() { errs[i] = c.Func(ctx) })
		}
		wg.Wait()

		results := make(map[string]string, len(checks))
		down, warned := false, false
		for i, c := range checks {
			results[c.Name] = healthOK
			switch {
			case errs[i] == nil:
			case c.Warn:
				warned = true
				results[c.Name] = healthWarning
				zerolog.Ctx(r.Context()).Warn().Err(errs[i]).Str("check", c.Name).Msg("health warning")
			default:
				down = true
				results[c.Name] = healthUnavailable
				zerolog.Ctx(r.Context()).Warn().Err(errs[i]).Str("check", c.Name).Msg("health check failed")
			}
		}
		if !down {
			body := healthy{Status: healthOK}
			if warned {
				body.Checks = results
			}
			Encode(w, r, http.StatusOK, body)
			return
		}
		status := http.StatusServiceUnavailable
		writeProblem(w, status, unhealthy{
			Problem: newProblem(r, status, SlugUnavailable, "the service cannot do its work now; retry later"),
			Checks:  results,
		})
	})
}

// Probes routes the open endpoints of a service's health on mux: GET /livez (the process
// answers: 200 {"status":"ok"}, nothing checked), GET /readyz (every check passes: it may take
// work; see Health) and GET /healthz, the same as /readyz.
func Probes(mux Mux, checks ...Check) {
	mux.Handle("GET /livez", Health())
	ready := Health(checks...)
	mux.Handle("GET /readyz", ready)
	mux.Handle("GET /healthz", ready)
}
