package httpapi

import (
	"context"
	"net/http"

	"walletgl/internal/problem"
)

func handleHealth(health func(ctx context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if health != nil {
			if err := health(r.Context()); err != nil {
				problem.Write(w, r, problem.New(problem.Unavailable, "unavailable", err.Error()))
				return
			}
		}
		encode(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}
