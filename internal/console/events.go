package console

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// Events is what the outbox and inbox pages, the same in both services, read and change.
type Events struct {
	Admin *admin.Admin
	// Retry processes failed inbox events again with the service's own handler
	// (inbox.Inbox.Retry on the service's pool).
	Retry func(ctx context.Context, ids ...string) []inbox.Retried
	// Resolve closes failed inbox events as the key named by, with the operator's resolution,
	// and records it in the audit trail in the same transaction (admin.ResolveInboxAudited);
	// nil: no resolve offered. It needs RetryScope, as a retry does.
	Resolve func(ctx context.Context, by, resolution string, ids []string) (admin.Resolved, error)
	// Broker reads the broker's streams and durable consumers for the broker page
	// (events.Topology.ReadBroker on the service's connection); nil: no broker page.
	Broker func(ctx context.Context) events.BrokerStatus
	Audit  Auditor
	// The scopes: to look, to requeue outbox rows ("": no requeue offered), to retry and
	// resolve inbox rows.
	View, Requeue, RetryScope auth.Scope
	// MaxAttempts is the relay's EVENTS_MAX_ATTEMPTS: a row's attempts are shown "4 of 10".
	MaxAttempts int
	// TracePath, when set, is the page that traces an outbox row's aggregate (its id appended):
	// every row links there, whatever its event type.
	TracePath string
}

// Auditor records an administrative action (auth.Keys does, in the audit trail).
type Auditor interface {
	Record(ctx context.Context, actor auth.Actor, action, target string, detail any) error
}

// PageSize is how many rows a console list shows.
const PageSize = 50

// Pages are the outbox and inbox pages.
func (e Events) Pages() []Page {
	pages := []Page{
		{Pattern: "GET /console/{$}", Scope: e.View, Nav: "Overview", Path: "/console/", Func: e.home},
		{Pattern: "GET /console/outbox", Scope: e.View, Nav: "Outbox", Path: "/console/outbox", Func: e.outboxList},
		{Pattern: "GET /console/outbox/{id}", Scope: e.View, Func: e.outboxRow},
		{Pattern: "GET /console/inbox", Scope: e.View, Nav: "Inbox", Path: "/console/inbox?status=failed", Func: e.inboxList},
		{Pattern: "GET /console/inbox/{id}", Scope: e.View, Func: e.inboxRow},
		{Pattern: "POST /console/inbox/retry", Scope: e.RetryScope, Func: e.retry},
	}
	if e.Requeue != "" {
		pages = append(pages, Page{Pattern: "POST /console/outbox/requeue", Scope: e.Requeue, Func: e.requeue})
	}
	if e.Resolve != nil {
		pages = append(pages, Page{Pattern: "POST /console/inbox/resolve", Scope: e.RetryScope, Func: e.resolve})
	}
	if e.Broker != nil {
		pages = append(pages, Page{Pattern: "GET /console/broker", Scope: e.View, Nav: "Broker", Path: "/console/broker", Func: e.broker})
	}
	return pages
}

// overview is the counts of both tables, the home page's and the lists' live part.
type overview struct {
	Rows          rowLinks
	MaxAttempts   int
	Outbox        admin.OutboxStats
	OutboxStatus  []string
	Inbox         admin.InboxStats
	InboxStatus   []string
	Reasons       []string
	LastError     *admin.OutboxError
	LastFailure   *admin.InboxFailure
	CanRequeue    bool
	RequeueStatus []string
}

func (e Events) overview(ctx context.Context) (overview, error) {
	o := overview{Rows: e.rowLinks(), MaxAttempts: e.MaxAttempts, OutboxStatus: contract.OutboxStatuses, InboxStatus: contract.InboxStatuses, Reasons: contract.FailureReasons,
		CanRequeue: e.Requeue != "", RequeueStatus: contract.RequeueStatuses}
	var err error
	if o.Outbox, err = e.Admin.OutboxStats(ctx); err != nil {
		return o, adminError(err)
	}
	if o.Inbox, err = e.Admin.InboxStats(ctx); err != nil {
		return o, adminError(err)
	}
	if o.LastError, err = e.Admin.LastOutboxError(ctx); err != nil {
		return o, adminError(err)
	}
	if o.LastFailure, err = e.Admin.LastInboxFailure(ctx); err != nil {
		return o, adminError(err)
	}
	return o, nil
}

func (e Events) home(ctx context.Context, _ *Request) (View, error) {
	o, err := e.overview(ctx)
	if err != nil {
		return View{}, err
	}
	return View{Template: "home", Title: "Overview", Data: o}, nil
}

// browseOf reads a list page's query: status (default def), filter q, cursor after.
func browseOf(req *Request, def string) (admin.Browse, error) {
	q, err := web.Query(req.Request)
	if err != nil {
		return admin.Browse{}, err
	}
	b := admin.Browse{Status: q.Get("status"), Filter: strings.TrimSpace(q.Get("q")), After: q.Get("after"), Limit: PageSize}
	if b.Status == "" {
		b.Status = def
	}
	return b, nil
}

// listData is a list page: the counts above it, the query, the rows and the next page's link.
type listData struct {
	overview
	Browse     admin.Browse
	OutboxRows []admin.OutboxRow
	InboxRows  []admin.InboxRow
	NextURL    string
	FirstURL   string
	Action     bool // rows of this status can be requeued / retried / resolved
	CanRetry   bool // Retry is offered for the selected rows
	CanResolve bool // Resolve is offered for the selected rows
	// Filters are the outbox page's status links: every row not acknowledged, each status, all.
	Filters []filterLink
}

// filterLink is one status filter of the outbox page.
type filterLink struct {
	Status, URL string
	Current     bool
}

// outboxFilters are the outbox page's status links, keeping the text filter.
func outboxFilters(b admin.Browse) []filterLink {
	out := make([]filterLink, 0, len(admin.OutboxBrowseStatuses))
	for _, s := range admin.OutboxBrowseStatuses {
		q := url.Values{"status": {s}}
		if b.Filter != "" {
			q.Set("q", b.Filter)
		}
		out = append(out, filterLink{Status: s, URL: "/console/outbox?" + q.Encode(), Current: s == b.Status})
	}
	return out
}

// rowLinks is how a page links an outbox row's aggregate to its trace.
type rowLinks struct {
	TracePath string // "": the service has no trace page
}

// Trace is the trace page of an aggregate id, or "" when there is none.
func (l rowLinks) Trace(aggregateID string) string {
	if l.TracePath == "" || aggregateID == "" {
		return ""
	}
	return l.TracePath + url.PathEscape(aggregateID)
}

func (e Events) rowLinks() rowLinks { return rowLinks{TracePath: e.TracePath} }

// actionable says whether the outbox rows a page lists may carry requeue checkboxes: a
// requeue is offered and the page can hold failed or dead_letter rows.
func (e Events) actionable(status string) bool {
	if e.Requeue == "" {
		return false
	}
	return contains(contract.RequeueStatuses, status) || status == admin.BrowseUnacknowledged || status == admin.BrowseAll
}

func (e Events) outboxList(ctx context.Context, req *Request) (View, error) {
	b, err := browseOf(req, admin.BrowseUnacknowledged)
	if err != nil {
		return View{}, err
	}
	o, err := e.overview(ctx)
	if err != nil {
		return View{}, err
	}
	page, err := e.Admin.BrowseOutbox(ctx, b)
	if err != nil {
		return View{}, adminError(err)
	}
	d := listData{overview: o, Browse: b, OutboxRows: page.Rows, Action: e.actionable(b.Status), Filters: outboxFilters(b)}
	d.NextURL, d.FirstURL = pageURLs("/console/outbox", b, page.Next)
	return View{Template: "outbox", Title: "Outbox: " + b.Status, Data: d}, nil
}

func (e Events) inboxList(ctx context.Context, req *Request) (View, error) {
	b, err := browseOf(req, "failed")
	if err != nil {
		return View{}, err
	}
	o, err := e.overview(ctx)
	if err != nil {
		return View{}, err
	}
	page, err := e.Admin.BrowseInbox(ctx, b)
	if err != nil {
		return View{}, adminError(err)
	}
	d := listData{overview: o, Browse: b, InboxRows: page.Rows, CanRetry: retryable(b.Status), CanResolve: e.Resolve != nil && b.Status == contract.StatusFailed}
	d.Action = d.CanRetry || d.CanResolve
	d.NextURL, d.FirstURL = pageURLs("/console/inbox", b, page.Next)
	return View{Template: "inbox", Title: "Inbox: " + b.Status, Data: d}, nil
}

// pageURLs are the links to the next page (none on the last) and to the first.
func pageURLs(path string, b admin.Browse, next string) (string, string) {
	q := url.Values{"status": {b.Status}}
	if b.Filter != "" {
		q.Set("q", b.Filter)
	}
	first := path + "?" + q.Encode()
	if next == "" {
		return "", first
	}
	q.Set("after", next)
	return path + "?" + q.Encode(), first
}

type outboxRowData struct {
	Row         admin.OutboxRow
	CanRequeue  bool
	MaxAttempts int
	Rows        rowLinks
}

// Requeuable says whether an outbox row in status may be requeued.
func Requeuable(status string) bool { return contains(contract.RequeueStatuses, status) }

func (e Events) outboxRow(ctx context.Context, req *Request) (View, error) {
	id, err := uuid.Parse(req.PathValue("id"))
	if err != nil {
		return View{}, problem.Newf(errNotFound, "%q is not an outbox id", req.PathValue("id"))
	}
	row, err := e.Admin.GetOutbox(ctx, id)
	if err != nil {
		return View{}, adminError(err)
	}
	return View{Template: "outbox_row", Title: "Outbox row " + id.String(), Data: outboxRowData{
		Row: row, CanRequeue: e.Requeue != "" && Requeuable(row.Status), MaxAttempts: e.MaxAttempts, Rows: e.rowLinks(),
	}}, nil
}

type inboxRowData struct {
	Row        admin.InboxRow
	CanRetry   bool
	CanResolve bool
}

func (e Events) inboxRow(ctx context.Context, req *Request) (View, error) {
	row, err := e.Admin.GetInbox(ctx, req.PathValue("id"))
	if err != nil {
		return View{}, adminError(err)
	}
	return View{Template: "inbox_row", Title: "Inbox row " + row.ID, Data: inboxRowData{
		Row: row, CanRetry: retryableRow(row), CanResolve: e.Resolve != nil && row.Status == contract.StatusFailed,
	}}, nil
}

// confirmData is the confirmation page of a requeue, a retry or a resolve: what will be done to
// which rows.
type confirmData struct {
	Action  string // the form's target
	Verb    string // "Requeue", "Retry", "Resolve"
	What    string
	IDs     []string
	Back    string
	Explain string
	// AskReason asks for the operator's reason (a resolve), required; Reason is what they gave.
	AskReason bool
	Reason    string
}

// maxActionIDs bounds the rows one form may act on: a page of a list.
const maxActionIDs = PageSize

// formIDs are the ids a form names (the checked rows), at least one.
func formIDs(form url.Values) ([]string, error) {
	ids := form["id"]
	switch {
	case len(ids) == 0:
		return nil, problem.Newf(errInvalid, "choose at least one row")
	case len(ids) > maxActionIDs:
		return nil, problem.Newf(errInvalid, "at most %d rows at once", maxActionIDs)
	}
	return ids, nil
}

// requeue sends failed or dead-lettered outbox rows back to pending, after a confirmation
// page: the form without confirm=yes shows what will happen, with it the rows move.
func (e Events) requeue(ctx context.Context, req *Request) (View, error) {
	raw, err := formIDs(req.Form)
	if err != nil {
		return View{}, err
	}
	ids, err := admin.ParseOutboxIDs(raw)
	if err != nil {
		return View{}, problem.Newf(errInvalid, "%s", err.Error())
	}
	back := backTo(req.Form.Get("back"), "/console/outbox")
	if req.Form.Get("confirm") != "yes" {
		return View{Template: "confirm", Title: "Requeue outbox rows", Data: confirmData{
			Action: "/console/outbox/requeue", Verb: "Requeue", What: "outbox rows", IDs: raw, Back: back,
			Explain: "Each row goes back to pending with its attempts reset (its attempt history keeps every error); the relay publishes it again under the same id, and the consumer's inbox makes sure it is applied once. Rows that are not failed or dead_letter are refused.",
		}}, nil
	}
	out, err := e.Admin.RequeueOutbox(ctx, ids...)
	if err != nil {
		return View{}, adminError(err)
	}
	e.record(ctx, req, "outbox.requeue", strings.Join(raw, ","), out)
	msg := fmt.Sprintf("Requeued %d of %d outbox rows.", len(out.IDs), len(ids))
	for _, r := range out.Refused {
		msg += fmt.Sprintf(" Refused %s (%s).", r.ID, statusOrNone(r.Status))
	}
	return View{Redirect: back, Flash: Flash{Kind: flashOfCount(len(out.IDs), len(ids)), Text: msg}}, nil
}

// statusOrNone is a refused row's status, or says there is no such row.
func statusOrNone(status string) string {
	if status == "" {
		return "no such row"
	}
	return status
}

// retryable says whether inbox rows of status may be retried: failed ones, and waiting ones
// (which post at once if what they wait for has posted).
func retryable(status string) bool {
	return status == contract.StatusFailed || status == contract.StatusWaiting
}

// retryableRow says whether a retry of row can succeed: a waiting row, or a failed one whose
// reason a retry can cure (contract.Retryable). A malformed, conflicting or unauthenticated
// event fails the same way every time: it is resolved instead.
func retryableRow(row admin.InboxRow) bool {
	return row.Status == contract.StatusWaiting || (row.Status == contract.StatusFailed && contract.Retryable(row.Reason))
}

// retry processes failed inbox events again with the service's handler, after a confirmation.
func (e Events) retry(ctx context.Context, req *Request) (View, error) {
	ids, err := formIDs(req.Form)
	if err != nil {
		return View{}, err
	}
	back := backTo(req.Form.Get("back"), "/console/inbox?status=failed")
	if req.Form.Get("confirm") != "yes" {
		return View{Template: "confirm", Title: "Retry inbox events", Data: confirmData{
			Action: "/console/inbox/retry", Verb: "Retry", What: "failed inbox events", IDs: ids, Back: back,
			Explain: "Each event is processed again from its stored payload with the service's own handler, in one transaction; one that fails again stays failed, one that still waits stays waiting. Events recorded unauthenticated are never retried.",
		}}, nil
	}
	tryIDs, poison, err := e.splitRetryable(ctx, ids)
	if err != nil {
		return View{}, err
	}
	var out []inbox.Retried
	if len(tryIDs) > 0 {
		out = e.Retry(ctx, tryIDs...)
		e.record(ctx, req, "inbox.retry", strings.Join(tryIDs, ","), out)
	}
	processed := 0
	var failed []string
	for _, r := range out {
		if r.Error == "" {
			processed++
		} else {
			failed = append(failed, r.ID)
		}
	}
	msg := fmt.Sprintf("Processed %d of %d events.", processed, len(ids))
	if len(failed) > 0 {
		msg += " Still failed: " + strings.Join(failed, ", ") + " (the service's log has why)."
	}
	if len(poison) > 0 {
		msg += " Not retried, as no retry can apply them (resolve them instead): " + strings.Join(poison, ", ") + "."
	}
	return View{Redirect: back, Flash: Flash{Kind: flashOfCount(processed, len(ids)), Text: msg}}, nil
}

// splitRetryable parts the ids of a retry into the rows a retry can apply and the others
// (failed for a reason no retry cures, or not a failed or waiting row), named with why.
func (e Events) splitRetryable(ctx context.Context, ids []string) (try, refused []string, err error) {
	for _, id := range ids {
		row, err := e.Admin.GetInbox(ctx, id)
		switch {
		case errors.Is(err, contract.ErrNotFound):
			refused = append(refused, id+" (no such row)")
		case err != nil:
			return nil, nil, adminError(err)
		case retryableRow(row):
			try = append(try, id)
		case row.Status == contract.StatusFailed:
			refused = append(refused, id+" ("+row.Reason+")")
		default:
			refused = append(refused, id+" ("+row.Status+")")
		}
	}
	return try, refused, nil
}

// resolveExplain is what the confirmation of a resolve says will happen.
const resolveExplain = "Each failed event is closed without being applied: its row becomes resolved, keeps its failure and payload for the record, and names your key, the time and your reason. A redelivery of it is absorbed as a duplicate and never applied; it no longer counts as failed in the overview or the health checks. Rows that are not failed are refused. Recorded in the audit trail."

// resolve closes failed inbox events with the operator's reason, after a confirmation page that
// asks for it: without confirm=yes, or without a reason, the page is shown (again).
func (e Events) resolve(ctx context.Context, req *Request) (View, error) {
	ids, err := formIDs(req.Form)
	if err != nil {
		return View{}, err
	}
	back := backTo(req.Form.Get("back"), "/console/inbox?status=failed")
	reason := strings.TrimSpace(req.Form.Get("reason"))
	confirm := confirmData{
		Action: "/console/inbox/resolve", Verb: "Resolve", What: "failed inbox events", IDs: ids, Back: back,
		Explain: resolveExplain, AskReason: true, Reason: reason,
	}
	if req.Form.Get("confirm") != "yes" {
		return View{Template: "confirm", Title: "Resolve inbox events", Data: confirm}, nil
	}
	if reason == "" {
		return View{}, problem.Newf(errInvalid, "a resolve needs a reason: say why the events are closed without being applied")
	}
	out, err := e.Resolve(ctx, req.Principal.Name, reason, ids)
	if errors.Is(err, admin.ErrNoResolution) {
		return View{}, problem.Newf(errInvalid, "%s", err.Error())
	}
	if err != nil {
		return View{}, adminError(err)
	}
	msg := fmt.Sprintf("Resolved %d of %d events.", len(out.IDs), len(ids))
	for _, r := range out.Refused {
		msg += fmt.Sprintf(" Refused %s (%s).", r.ID, statusOrNone(r.Status))
	}
	return View{Redirect: back, Flash: Flash{Kind: flashOfCount(len(out.IDs), len(ids)), Text: msg}}, nil
}

// broker shows what the broker says of both streams and both durable consumers, as the status
// command prints it.
func (e Events) broker(ctx context.Context, _ *Request) (View, error) {
	return View{Template: "broker", Title: "Broker", Data: e.Broker(ctx)}, nil
}

// record writes an administrative action to the audit trail; a failure is logged, not shown:
// the rows did move.
func (e Events) record(ctx context.Context, req *Request, action, target string, detail any) {
	if err := e.Audit.Record(ctx, auth.ActorOf(req.Principal), action, target, detail); err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Str("action", action).Msg("console action not recorded in the audit trail")
	}
}

// backTo is where a form returns: a console path it names, or def.
func backTo(back, def string) string {
	if strings.HasPrefix(back, Prefix) && !strings.HasPrefix(back, "//") && !strings.ContainsAny(back, "\\\r\n") {
		return back
	}
	return def
}

// EventsError is adminError for the services' own pages, which read the operator API too.
func EventsError(err error) error { return adminError(err) }

// adminError turns the operator API's errors into the console's problems: an operator's
// mistake is shown with its explanation, an unreachable database as unavailable; anything
// else stays internal (logged, never shown).
func adminError(err error) error {
	switch {
	case errors.Is(err, contract.ErrInvalidStatus), errors.Is(err, admin.ErrInvalidCursor):
		return problem.Newf(errInvalid, "%s", err.Error())
	case errors.Is(err, contract.ErrNotFound):
		return problem.Newf(errNotFound, "no such row")
	case errors.Is(err, contract.ErrUnavailable):
		return fmt.Errorf("%w: %w", errUnavailable, err)
	}
	return err
}
