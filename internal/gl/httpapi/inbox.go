package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// ErrInvalidResolve is the problem of a resolve the GL cannot do as asked (its detail says why).
var ErrInvalidResolve = problem.New(problem.Invalid, "invalid-request", "the resolve is not valid")

// handleAdminResolveInbox closes failed inbox events an operator names ("ids", inbox ids
// "gl:<event id>") with their reason ("reason", required): each becomes resolved, its failure
// kept, and is never applied afterwards. The rows and the audit record (inbox.resolve) commit
// together. Ids that could not be resolved are listed as refused, with their status ("" for an
// unknown id).
func handleAdminResolveInbox(db database.TxBeginner) http.Handler {
	type request struct {
		IDs    []string `json:"ids"`
		Reason string   `json:"reason"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if err := checkResolve(req.IDs, req.Reason); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if db == nil {
			web.WriteProblem(w, r, problem.Newf(gl.ErrUnavailable, "this GL resolves no inbox events"))
			return
		}
		p, _ := auth.FromContext(r.Context())
		out, err := admin.ResolveInboxAudited(r.Context(), db, AuditByKey, p.Name, req.Reason, "api", req.IDs...)
		if err != nil {
			web.WriteProblem(w, r, resolveError(err))
			return
		}
		zerolog.Ctx(r.Context()).Info().Int("resolved", len(out.IDs)).Int("refused", len(out.Refused)).Msg("inbox events resolved by an operator")
		web.Encode(w, r, http.StatusOK, out)
	})
}

// checkResolve refuses a resolve without ids, with too many, or without a reason.
func checkResolve(ids []string, reason string) error {
	switch {
	case len(ids) == 0:
		return problem.Newf(ErrInvalidResolve, `give "ids": the inbox ids of the failed events to resolve`)
	case len(ids) > admin.MaxLimit:
		return problem.Newf(ErrInvalidResolve, "at most %d ids at once", admin.MaxLimit)
	case strings.TrimSpace(reason) == "":
		return problem.Newf(ErrInvalidResolve, `give "reason": why the events are closed without being applied`)
	}
	for _, id := range ids {
		if strings.TrimSpace(id) == "" {
			return problem.Newf(ErrInvalidResolve, "an inbox id is empty")
		}
	}
	return nil
}

// resolveError turns the operator API's errors into problems: a reason that is not acceptable
// is invalid with its explanation, a database away is unavailable; anything else is internal.
func resolveError(err error) error {
	switch {
	case errors.Is(err, admin.ErrNoResolution):
		return problem.Newf(ErrInvalidResolve, "%s", err.Error())
	case errors.Is(err, contract.ErrUnavailable):
		return fmt.Errorf("%w: resolve inbox events: %w", gl.ErrUnavailable, err)
	}
	return fmt.Errorf("resolve inbox events: %w", err)
}
