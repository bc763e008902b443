package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// handleAdminOutbox answers with the outbox stats, or with the rows of ?status= (up to
// ?limit=, default 50, at most 1000): what an operator looks at before acting.
func handleAdminOutbox(ops *admin.Admin) http.Handler {
	type list struct {
		Status string            `json:"status"`
		Rows   []admin.OutboxRow `json:"rows"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		status := query.Get("status")
		if status == "" {
			stats, err := ops.OutboxStats(r.Context())
			if err != nil {
				web.WriteProblem(w, r, adminError("outbox stats", err))
				return
			}
			web.Encode(w, r, http.StatusOK, stats)
			return
		}
		limit, err := web.Limit(query, admin.DefaultLimit, admin.MaxLimit)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		rows, err := ops.ListOutbox(r.Context(), status, limit)
		if err != nil {
			web.WriteProblem(w, r, adminError("list outbox", err))
			return
		}
		web.Encode(w, r, http.StatusOK, list{Status: status, Rows: rows})
	})
}

// handleAdminRequeue sends failed or dead-lettered outbox rows back to pending: those named
// by "ids", or every row of "status". Ids that could not be requeued are listed as refused,
// with their status ("" for an unknown id).
func handleAdminRequeue(ops *admin.Admin, audit Auditor) http.Handler {
	type request struct {
		IDs    []string `json:"ids"`
		Status string   `json:"status"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		var out admin.Requeued
		switch {
		case (len(req.IDs) == 0) == (req.Status == ""):
			web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, `give either "ids" (a non-empty list) or "status" (failed or dead_letter)`))
			return
		case req.Status != "":
			out, err = ops.RequeueOutboxStatus(r.Context(), req.Status)
		default:
			ids := make([]uuid.UUID, 0, len(req.IDs))
			for _, s := range req.IDs {
				id, perr := uuid.Parse(s)
				if perr != nil || len(s) != 36 {
					web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, "outbox id %q is not a UUID", s))
					return
				}
				ids = append(ids, id)
			}
			out, err = ops.RequeueOutbox(r.Context(), ids...)
		}
		if err != nil {
			web.WriteProblem(w, r, adminError("requeue outbox", err))
			return
		}
		zerolog.Ctx(r.Context()).Info().Int("requeued", len(out.IDs)).Int("refused", len(out.Refused)).Msg("outbox rows requeued by an operator")
		p, _ := auth.FromContext(r.Context())
		target := req.Status
		if target == "" {
			target = strings.Join(req.IDs, ",")
		}
		if err := audit.Record(r.Context(), auth.ActorOf(p), "outbox.requeue", target, out); err != nil {
			// The rows moved; the answer must not hide that the trail missed it.
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("outbox requeue not recorded in the audit trail")
		}
		web.Encode(w, r, http.StatusOK, out)
	})
}

// adminError turns the operator's mistakes into ErrInvalid with the explanation, and a
// database that cannot be reached into wallet.ErrUnavailable; anything else is internal.
func adminError(op string, err error) error {
	switch {
	case errors.Is(err, contract.ErrInvalidStatus):
		return problem.Newf(wallet.ErrInvalid, "%s", err.Error())
	case errors.Is(err, contract.ErrUnavailable):
		return fmt.Errorf("%w: %s: %w", wallet.ErrUnavailable, op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
