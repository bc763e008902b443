package httpapi

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/console"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/glapi"
	"walletgl/internal/web"
)

// The wallet's console pages (package console serves them with its outbox and inbox pages).

// Transfers is what the wallet's transfer pages read: its store.
type Transfers interface {
	GetTransfer(ctx context.Context, id uuid.UUID) (wallet.Transfer, error)
	TransferByIdempotencyKey(ctx context.Context, key string) (wallet.Transfer, error)
	ListTransfers(ctx context.Context, q wallet.TransferQuery) (wallet.Page, error)
}

// Trace is the wallet's transfer pages: the transfers, and one traced end to end through the
// outbox, the stream and the GL (read through the GL's API) back to its acknowledgment.
type Trace struct {
	Transfers Transfers
	Admin     *admin.Admin
	GL        *glapi.Client // GL_URL with GL_API_KEY (ledger:read)
	Stream    string        // the stream the wallet's events go to (WALLET_EVENTS)
	Scope     auth.Scope    // to look (transfers:read)
	// Requeue is the scope of the outbox page's requeue (outbox:admin): a key that holds it, and
	// acts for no owner, gets the same requeue on the trace of a failed or dead_letter row.
	Requeue     auth.Scope
	MaxAttempts int // the relay's EVENTS_MAX_ATTEMPTS, for "attempt 4 of 10"
}

// Pages are the transfer list and the trace.
func (t Trace) Pages() []console.Page {
	return []console.Page{
		{Pattern: "GET /console/transfers", Scope: t.Scope, Nav: "Transfers", Path: "/console/transfers", Func: t.list, ForOwners: true},
		{Pattern: "GET /console/transfers/{id}", Scope: t.Scope, Func: t.trace, ForOwners: true},
	}
}

type transfersData struct {
	Query     string
	Transfers []wallet.Transfer
	NextURL   string
}

// list shows the transfers in commit order, or finds the one a search names (its id or its
// Idempotency-Key) and goes to its trace.
func (t Trace) list(ctx context.Context, req *console.Request) (console.View, error) {
	ctx = actsFor(ctx, req.Principal)
	q, err := web.Query(req.Request)
	if err != nil {
		return console.View{}, err
	}
	if find := strings.TrimSpace(q.Get("q")); find != "" {
		tr, err := t.find(ctx, find)
		if err != nil {
			return console.View{}, err
		}
		return console.View{Redirect: "/console/transfers/" + tr.ID.String()}, nil
	}
	after, err := wallet.ParseCursor(q.Get("after"))
	if err != nil {
		return console.View{}, err
	}
	page, err := t.Transfers.ListTransfers(ctx, wallet.TransferQuery{After: after, Limit: console.PageSize})
	if err != nil {
		return console.View{}, err
	}
	d := transfersData{Transfers: page.Transfers}
	if next := page.Next.String(); next != "" {
		d.NextURL = "/console/transfers?" + url.Values{"after": {next}}.Encode()
	}
	return console.View{Template: "transfers", Title: "Transfers", Data: d}, nil
}

// find looks a transfer up by id, then by Idempotency-Key (a key may look like a UUID).
func (t Trace) find(ctx context.Context, s string) (wallet.Transfer, error) {
	if id, err := uuid.Parse(s); err == nil && len(s) == 36 {
		tr, err := t.Transfers.GetTransfer(ctx, id)
		if !errors.Is(err, wallet.ErrTransferNotFound) {
			return tr, err
		}
	}
	tr, err := t.Transfers.TransferByIdempotencyKey(ctx, s)
	if errors.Is(err, wallet.ErrTransferNotFound) {
		return tr, problem.Newf(wallet.ErrTransferNotFound, "no transfer has the id or Idempotency-Key %q", s)
	}
	return tr, err
}

// traceData is a transfer's way through the pipeline, step by step.
type traceData struct {
	Transfer wallet.Transfer
	Outbox   *admin.OutboxRow // nil: removed by retention after its acknowledgment
	Stream   string
	Entries  []glapi.Entry
	GLError  string // why the GL could not be asked (its API's answer, or no key)
	Steps    []step
	// CanRequeue offers the outbox page's requeue (its confirmation, its audit record) here.
	CanRequeue  bool
	MaxAttempts int
}

// step is one hop of the trace with its state: done, waiting or failed.
type step struct {
	Name, State, Note string
}

func (t Trace) trace(ctx context.Context, req *console.Request) (console.View, error) {
	ctx = actsFor(ctx, req.Principal)
	id, err := wallet.ParseTransferID(req.PathValue("id"))
	if err != nil {
		return console.View{}, err
	}
	tr, err := t.Transfers.GetTransfer(ctx, id)
	if err != nil {
		return console.View{}, err
	}
	d := traceData{Transfer: tr, Stream: t.Stream, MaxAttempts: t.MaxAttempts}
	row, err := t.Admin.GetOutbox(ctx, tr.EventID)
	switch {
	case errors.Is(err, contract.ErrNotFound):
	case err != nil:
		return console.View{}, console.EventsError(err)
	default:
		d.Outbox = &row
		d.CanRequeue = t.Requeue != "" && req.Principal.Owner == "" && req.Principal.Has(t.Requeue) && console.Requeuable(row.Status)
	}
	if d.Entries, err = t.GL.EntriesOfTransfer(ctx, tr.ID.String()); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("console: trace: ask the GL")
		d.GLError = "the GL's API could not be asked (GL_URL, GL_API_KEY with ledger:read): the service's log has why"
	}
	d.Steps = steps(d)
	return console.View{Template: "trace", Title: "Transfer " + tr.ID.String(), Data: d}, nil
}

// actsFor is ctx acting for p's owner: a key with an owner sees its owner's transfers only.
func actsFor(ctx context.Context, p auth.Principal) context.Context {
	return wallet.WithActor(ctx, wallet.Actor{Owner: p.Owner, Funding: p.Has(ScopeWalletsAdmin)})
}

// steps says how far the transfer got: committed, published, stored, posted, acknowledged.
func steps(d traceData) []step {
	out := []step{{Name: "transfer committed", State: "done", Note: "with its outbox row, in one transaction"}}
	row := d.Outbox
	switch {
	case row == nil:
		out = append(out, step{"outbox row", "done", "removed by retention after its acknowledgment"},
			step{"stored in the stream", "done", "(the row is gone; its sequence with it)"})
	case row.Status == "failed" || row.Status == "dead_letter":
		out = append(out, step{"outbox row", "failed", row.Status + ": " + clipped(row.LastError, 160)},
			step{"stored in the stream", "waiting", "not stored: the broker refused the publish"})
	case row.StreamSeq == nil && row.Status == "acknowledged":
		// Acknowledged before the relay that published it recorded the publish (it stopped
		// while it held the mark: EVENTS_MARK_DELAY).
		out = append(out, step{"outbox row", "done", row.Status}, step{"stored in the stream", "done", "its publish was not recorded"})
	case row.StreamSeq == nil:
		out = append(out, step{"outbox row", "waiting", row.Status}, step{"stored in the stream", "waiting", "no PubAck recorded yet"})
	default:
		out = append(out, step{"outbox row", "done", row.Status}, step{"stored in the stream", "done", ""})
	}
	switch {
	case d.GLError != "":
		out = append(out, step{"posted by the GL", "unknown", d.GLError})
	case len(d.Entries) == 0:
		out = append(out, step{"posted by the GL", "waiting", "the GL has no entry for it yet"})
	default:
		out = append(out, step{"posted by the GL", "done", "entry " + d.Entries[0].ID})
	}
	switch {
	case row == nil || row.Status == "acknowledged":
		out = append(out, step{"acknowledged", "done", "the GL's TransferPosted.v2 came back"})
	default:
		out = append(out, step{"acknowledged", "waiting", "no acknowledgment yet"})
	}
	return out
}

func clipped(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
