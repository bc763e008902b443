package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
)

// ErrNoResolution is the refusal of a resolve without the operator's reason.
var ErrNoResolution = errors.New("a resolution needs a reason")

// MaxResolutionLen bounds the operator's reason, in characters.
const MaxResolutionLen = 1000

// InboxRefusal names an inbox id that was not moved and why: its status, or "" when no such
// row exists.
type InboxRefusal struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Resolved is the outcome of a resolve: the rows closed, and the ids asked for that were not
// (only failed rows are resolved).
type Resolved struct {
	IDs     []string       `json:"resolved"`
	Refused []InboxRefusal `json:"refused,omitempty"`
}

// ResolveInbox closes the failed inbox rows among ids (inbox ids, "<consumer>:<event id>") for
// an operator: each becomes resolved with by (the key that asked) and resolution (why, required),
// its failure kept for the record. A resolved event is never applied: the inbox claim takes a
// redelivery of it as a duplicate. Other ids are refused, with their status.
func (a *Admin) ResolveInbox(ctx context.Context, by, resolution string, ids ...string) (Resolved, error) {
	resolution = strings.TrimSpace(resolution)
	switch {
	case resolution == "":
		return Resolved{}, fmt.Errorf("%w: say why the events are closed without being applied", ErrNoResolution)
	case utf8.RuneCountInString(resolution) > MaxResolutionLen:
		return Resolved{}, fmt.Errorf("%w of at most %d characters", ErrNoResolution, MaxResolutionLen)
	}
	q := eventsdb.New(a.db)
	out := Resolved{IDs: []string{}}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		_, err := q.ResolveFailedInbox(ctx, eventsdb.ResolveFailedInboxParams{ID: id, ResolvedBy: by, Resolution: resolution})
		switch err := interpretError(err); {
		case err == nil:
			out.IDs = append(out.IDs, id)
		case errors.Is(err, contract.ErrNotFound):
			refusal, err := a.inboxRefusal(ctx, id)
			if err != nil {
				return out, err
			}
			out.Refused = append(out.Refused, refusal)
		default:
			return out, fmt.Errorf("resolve inbox %s: %w", id, err)
		}
	}
	return out, nil
}

// inboxRefusal is why id was not resolved: its status, or none when there is no such row.
func (a *Admin) inboxRefusal(ctx context.Context, id string) (InboxRefusal, error) {
	row, err := eventsdb.New(a.db).GetInbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound):
		return InboxRefusal{ID: id}, nil
	case err != nil:
		return InboxRefusal{}, fmt.Errorf("look up inbox %s: %w", id, err)
	}
	return InboxRefusal{ID: id, Status: row.Status}, nil
}

// AuditFunc records an operator's action in the audit trail in db, the transaction of the
// change, under whoever asked: the key the request ctx carries (httpapi.AuditByKey), or the
// operator of a command (cli:<OS user>).
type AuditFunc func(ctx context.Context, db database.Executor, action, target string, detail any) error

// ActionResolve is the audit trail's action of a resolve.
const ActionResolve = "inbox.resolve"

// resolveRecord is a resolve as the audit trail keeps it.
type resolveRecord struct {
	Resolution string `json:"resolution"`
	Via        string `json:"via"` // "api", "console" or "cli"
	Resolved
}

// ResolveInboxAudited resolves as ResolveInbox does, in one transaction on db with its audit
// record (ActionResolve, the ids as target, the reason and the outcome as detail): the rows
// move and the trail records it, or neither. via says where the operator asked: api, console,
// cli.
func ResolveInboxAudited(ctx context.Context, db database.TxBeginner, audit AuditFunc, by, resolution, via string, ids ...string) (Resolved, error) {
	return database.WithTxV(ctx, db, func(tx pgx.Tx) (Resolved, error) {
		out, err := New(tx).ResolveInbox(ctx, by, resolution, ids...)
		if err != nil {
			return Resolved{}, err
		}
		record := resolveRecord{Resolution: strings.TrimSpace(resolution), Via: via, Resolved: out}
		if err := audit(ctx, tx, ActionResolve, strings.Join(ids, ","), record); err != nil {
			return Resolved{}, fmt.Errorf("record the resolve in the audit trail: %w", interpretError(err))
		}
		return out, nil
	})
}
