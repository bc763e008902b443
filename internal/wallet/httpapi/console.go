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
	ListRecentTransfers(ctx context.Context, q wallet.RecentQuery) (wallet.Page, error)
	GetHold(ctx context.Context, id uuid.UUID) (wallet.Hold, error)
	GetBatch(ctx context.Context, id uuid.UUID) (wallet.Batch, error)
	GetBatchReversal(ctx context.Context, id uuid.UUID) (wallet.BatchReversal, error)
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

// Pages are the transfer list and the traces of a transfer, a hold and a batch. Every outbox
// row's aggregate links to /console/transfers/{id}, which goes on to the hold's or the batch's
// page when the id is not a transfer's.
func (t Trace) Pages() []console.Page {
	return []console.Page{
		{Pattern: "GET /console/transfers", Scope: t.Scope, Nav: "Transfers", Path: "/console/transfers", Func: t.list, ForOwners: true},
		{Pattern: "GET /console/transfers/{id}", Scope: t.Scope, Func: t.trace, ForOwners: true},
		{Pattern: "GET /console/holds/{id}", Scope: t.Scope, Func: t.hold, ForOwners: true},
		{Pattern: "GET /console/batches/{id}", Scope: t.Scope, Func: t.batch, ForOwners: true},
	}
}

type transfersData struct {
	Query     string
	Status    string // the event status filtered on; "" for every transfer
	Filters   []statusLink
	Transfers []wallet.Transfer
	NextURL   string
	FirstURL  string
}

// statusLink is one of the transfer list's event-status filters.
type statusLink struct {
	Status, Label, URL string
	Current            bool
}

// transferFilters are the list's links: every transfer, the unacknowledged ones, and each
// outbox status.
func transferFilters(current string) []statusLink {
	out := []statusLink{{Status: "", Label: "all", URL: "/console/transfers", Current: current == ""}}
	for _, s := range append([]string{wallet.EventUnacknowledged}, contract.OutboxStatuses...) {
		out = append(out, statusLink{Status: s, Label: s, URL: "/console/transfers?" + url.Values{"status": {s}}.Encode(), Current: current == s})
	}
	return out
}

// list shows the transfers newest first, those whose event is at ?status= when given, or
// finds the one a search names (its id or its Idempotency-Key) and goes to its trace.
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
	before, err := wallet.ParseCursor(q.Get("before"))
	if err != nil {
		return console.View{}, err
	}
	status := q.Get("status")
	page, err := t.Transfers.ListRecentTransfers(ctx, wallet.RecentQuery{Before: before, Limit: console.PageSize, EventStatus: status})
	if err != nil {
		return console.View{}, err
	}
	d := transfersData{Status: status, Filters: transferFilters(status), Transfers: page.Transfers, FirstURL: "/console/transfers"}
	if status != "" {
		d.FirstURL += "?" + url.Values{"status": {status}}.Encode()
	}
	if next := page.Next.String(); next != "" {
		v := url.Values{"before": {next}}
		if status != "" {
			v.Set("status", status)
		}
		d.NextURL = "/console/transfers?" + v.Encode()
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

// eventTrace is one outbox row's way through the pipeline: the row, the stream, the GL's
// entry (read through the GL's API under its key) and the acknowledgment.
type eventTrace struct {
	Name     string           // what the event is, "HoldPlaced.v1"
	EventID  uuid.UUID        // the row's id
	EntryKey string           // the GL entry's key (its transfer_id)
	Outbox   *admin.OutboxRow // nil: removed by retention after its acknowledgment
	Stream   string
	Entries  []glapi.Entry
	GLError  string // why the GL could not be asked (its API's answer, or no key)
	Steps    []step
	// CanRequeue offers the outbox page's requeue (its confirmation, its audit record) here,
	// back to Back afterwards.
	CanRequeue  bool
	Back        string
	MaxAttempts int
}

// traceData is a transfer's way through the pipeline, step by step. A leg of a batch shares
// its batch's event (and its entry), a reversal a batch reversal made its batch reversal's.
type traceData struct {
	Transfer wallet.Transfer
	LegOf    int // a leg's place in its batch, from 1
	eventTrace
}

// Event is the transfer's event trace, for its requeue form.
func (d traceData) Event() eventTrace { return d.eventTrace }

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
	if errors.Is(err, wallet.ErrTransferNotFound) {
		if to, ok := t.aggregatePage(ctx, id); ok {
			return console.View{Redirect: to}, nil
		}
	}
	if err != nil {
		return console.View{}, err
	}
	key, committed := tr.ID.String(), "transfer committed"
	switch {
	case tr.BatchID != uuid.Nil:
		key, committed = tr.BatchID.String(), "batch committed"
	case tr.BatchReversalID != uuid.Nil:
		key, committed = tr.BatchReversalID.String(), "batch reversal committed"
	}
	ev, err := t.follow(ctx, req, eventTrace{Name: "transfer", EventID: tr.EventID, EntryKey: key, Back: "/console/transfers/" + tr.ID.String()}, committed)
	if err != nil {
		return console.View{}, err
	}
	d := traceData{Transfer: tr, eventTrace: ev}
	if tr.BatchID != uuid.Nil {
		d.LegOf = tr.BatchLeg + 1
	}
	return console.View{Template: "trace", Title: "Transfer " + tr.ID.String(), Data: d}, nil
}

// aggregatePage is the page of an outbox row's aggregate that is not a transfer: a hold's, a
// batch's, or a batch reversal's batch's.
func (t Trace) aggregatePage(ctx context.Context, id uuid.UUID) (string, bool) {
	if _, err := t.Transfers.GetHold(ctx, id); err == nil {
		return "/console/holds/" + id.String(), true
	}
	if _, err := t.Transfers.GetBatch(ctx, id); err == nil {
		return "/console/batches/" + id.String(), true
	}
	if r, err := t.Transfers.GetBatchReversal(ctx, id); err == nil {
		return "/console/batches/" + r.BatchID.String() + "#reversal-" + id.String(), true
	}
	return "", false
}

// follow reads ev's outbox row and GL entry and says how far it got.
func (t Trace) follow(ctx context.Context, req *console.Request, ev eventTrace, committed string) (eventTrace, error) {
	ev.Stream, ev.MaxAttempts = t.Stream, t.MaxAttempts
	row, err := t.Admin.GetOutbox(ctx, ev.EventID)
	switch {
	case errors.Is(err, contract.ErrNotFound):
	case err != nil:
		return ev, console.EventsError(err)
	default:
		ev.Outbox = &row
		ev.CanRequeue = t.Requeue != "" && req.Principal.Owner == "" && req.Principal.Has(t.Requeue) && console.Requeuable(row.Status)
	}
	if ev.Entries, err = t.GL.EntriesOfTransfer(ctx, ev.EntryKey); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("console: trace: ask the GL")
		ev.GLError = "the GL's API could not be asked (GL_URL, GL_API_KEY with ledger:read): the service's log has why"
	}
	ev.Steps = steps(committed, ev)
	return ev, nil
}

// holdData is a hold's way through the pipeline: its placement and, once it finished, its
// capture or void, each an event of its own with its GL entry.
type holdData struct {
	Hold   wallet.Hold
	Events []eventTrace
}

// hold traces a hold: HoldPlaced.v1 (GL entry hold:<id>:placed) and HoldCaptured.v1 or
// HoldVoided.v1 (hold:<id>:released).
func (t Trace) hold(ctx context.Context, req *console.Request) (console.View, error) {
	ctx = actsFor(ctx, req.Principal)
	id, err := wallet.ParseHoldID(req.PathValue("id"))
	if err != nil {
		return console.View{}, err
	}
	h, err := t.Transfers.GetHold(ctx, id)
	if err != nil {
		return console.View{}, err
	}
	back := "/console/holds/" + h.ID.String()
	placed, err := t.follow(ctx, req, eventTrace{Name: contract.TypeHoldPlaced, EventID: h.PlacedEventID, EntryKey: "hold:" + h.ID.String() + ":placed", Back: back}, "hold placed")
	if err != nil {
		return console.View{}, err
	}
	d := holdData{Hold: h, Events: []eventTrace{placed}}
	if h.FinishedEventID != uuid.Nil {
		name, committed := contract.TypeHoldVoided, "hold voided ("+h.VoidReason+")"
		if h.Status == wallet.HoldCaptured {
			name, committed = contract.TypeHoldCaptured, "hold captured"
		}
		finished, err := t.follow(ctx, req, eventTrace{Name: name, EventID: h.FinishedEventID, EntryKey: "hold:" + h.ID.String() + ":released", Back: back}, committed)
		if err != nil {
			return console.View{}, err
		}
		d.Events = append(d.Events, finished)
	}
	return console.View{Template: "hold", Title: "Hold " + h.ID.String(), Data: d}, nil
}

// batchData is a batch's way through the pipeline (its one event and entry) with its legs and
// its reversals, each with its own event.
type batchData struct {
	Batch     wallet.Batch
	Event     eventTrace
	Reversals []batchReversalData
}

type batchReversalData struct {
	Reversal wallet.BatchReversal
	Event    eventTrace
}

// batch traces a batch: TransferBatchCompleted.v1, its GL entry (keyed by the batch id), its
// legs, and each batch reversal with its TransferBatchReversed.v1 and entry.
func (t Trace) batch(ctx context.Context, req *console.Request) (console.View, error) {
	ctx = actsFor(ctx, req.Principal)
	id, err := wallet.ParseBatchID(req.PathValue("id"))
	if err != nil {
		return console.View{}, err
	}
	b, err := t.Transfers.GetBatch(ctx, id)
	if err != nil {
		return console.View{}, err
	}
	back := "/console/batches/" + b.ID.String()
	ev, err := t.follow(ctx, req, eventTrace{Name: contract.TypeTransferBatchCompleted, EventID: b.EventID, EntryKey: b.ID.String(), Back: back}, "batch committed")
	if err != nil {
		return console.View{}, err
	}
	d := batchData{Batch: b, Event: ev}
	for _, rid := range b.Reversals {
		r, err := t.Transfers.GetBatchReversal(ctx, rid)
		if err != nil {
			return console.View{}, err
		}
		rev, err := t.follow(ctx, req, eventTrace{Name: contract.TypeTransferBatchReversed, EventID: r.EventID, EntryKey: r.ID.String(), Back: back}, "batch reversal committed")
		if err != nil {
			return console.View{}, err
		}
		d.Reversals = append(d.Reversals, batchReversalData{Reversal: r, Event: rev})
	}
	return console.View{Template: "batch", Title: "Batch " + b.ID.String(), Data: d}, nil
}

// actsFor is ctx acting for p's owner: a key with an owner sees its owner's transfers only.
func actsFor(ctx context.Context, p auth.Principal) context.Context {
	return wallet.WithActor(ctx, wallet.Actor{Owner: p.Owner, Funding: p.Has(ScopeWalletsAdmin)})
}

// steps says how far an event got: committed, published, stored, posted, acknowledged.
func steps(committed string, d eventTrace) []step {
	out := []step{{Name: committed, State: "done", Note: "with its outbox row, in one transaction"}}
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
		out = append(out, step{"acknowledged", "done", "the GL's acknowledgment came back"})
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
