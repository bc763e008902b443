package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/metrics"
)

// interpretError is the one place where this package reads a database error, and the edge where it
// becomes an error of the contract: no row is contract.ErrNotFound, a database that cannot be
// reached is contract.ErrUnavailable (its cause kept); anything else is returned unchanged.
func interpretError(err error) error {
	return database.Interpret(err, contract.ErrNotFound, contract.ErrUnavailable)
}

// Admin is the operator's view of a service's outbox and inbox: what is where, and the ways out
// for rows that are stuck. Both binaries' subcommands and the wallet's admin endpoints use it.
type Admin struct {
	db database.Executor
}

// New returns the operator API on db, a database with the events migrations applied.
func New(db database.Executor) *Admin { return &Admin{db: db} }

// OutboxStats is how many outbox rows are in each status and how long the oldest have waited.
type OutboxStats struct {
	Counts map[string]int64 `json:"counts"` // every status of contract.OutboxStatuses, zeros included
	// OldestPending and OldestUnacknowledged are creation times; nil when no row is in question.
	OldestPending        *time.Time `json:"oldest_pending_at"`
	OldestUnacknowledged *time.Time `json:"oldest_unacknowledged_at"`
	// The same as ages, measured when the stats were read (0 when there is none); in JSON,
	// as seconds.
	OldestPendingAge        time.Duration `json:"-"`
	OldestUnacknowledgedAge time.Duration `json:"-"`
}

// OutboxRow is one outbox row as an operator sees it.
type OutboxRow struct {
	ID             uuid.UUID       `json:"id"`
	EventType      string          `json:"event_type"`
	AggregateID    string          `json:"aggregate_id"`
	Status         string          `json:"status"`
	Attempts       int32           `json:"attempts"`
	PublishCount   int32           `json:"publish_count"`
	LastError      string          `json:"last_error,omitempty"`
	NextAttemptAt  *time.Time      `json:"next_attempt_at,omitempty"`
	LeaseOwner     string          `json:"lease_owner,omitempty"`
	LeaseUntil     *time.Time      `json:"lease_until,omitempty"`
	StreamSeq      *int64          `json:"stream_seq,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	DispatchedAt   *time.Time      `json:"dispatched_at,omitempty"`
	AcknowledgedAt *time.Time      `json:"acknowledged_at,omitempty"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Payload        json.RawMessage `json:"payload"`
	// TraceContext is the W3C traceparent of the span that wrote the row: its trace is the
	// transfer's (docs/operations.md#traces). Empty when the row was written untraced.
	TraceContext string `json:"trace_context,omitempty"`
	// History is the row's refused publishes and requeues, oldest first (the newest
	// MaxHistory): a requeue resets Attempts and LastError, never this.
	History []Attempt `json:"attempt_history"`
}

// Attempt is one entry of an outbox row's history: a publish the broker refused (Status the one
// it moved the row to, failed or dead_letter, with the Error) or an operator's requeue (Status
// "requeued", Attempt the attempts it reset).
type Attempt struct {
	Attempt int32     `json:"attempt"`
	Status  string    `json:"status"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"`
}

// MaxHistory is how many entries an outbox row's history keeps, the newest
// (db/schema/events/00010).
const MaxHistory = 20

// StatusRequeued is the status of a requeue's entry in a row's history.
const StatusRequeued = "requeued"

// historyOf reads a row's attempt_history; a history that cannot be read is shown empty
// rather than hiding the row.
func historyOf(raw json.RawMessage) []Attempt {
	out := []Attempt{}
	if len(raw) == 0 {
		return out
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return []Attempt{}
	}
	return out
}

// Refusal names an id that was not moved and why: its status, or "" when no such row exists.
type Refusal struct {
	ID     uuid.UUID `json:"id"`
	Status string    `json:"status"`
}

// Requeued is the outcome of a requeue: the rows sent back to pending, and the ids asked for
// that were not (only failed and dead_letter rows may be requeued).
type Requeued struct {
	IDs     []uuid.UUID `json:"requeued"`
	Refused []Refusal   `json:"refused,omitempty"`
}

// OutboxOpen counts the rows the relay still works on and the dead letters, and dates the
// oldest waiting ones, in one read of the partial indexes of those statuses (not the
// acknowledged rows retention keeps): what the metrics read at every scrape.
func (a *Admin) OutboxOpen(ctx context.Context) (metrics.OutboxSample, error) {
	o, err := eventsdb.New(a.db).OutboxOpen(ctx)
	if err != nil {
		return metrics.OutboxSample{}, fmt.Errorf("read open outbox rows: %w", interpretError(err))
	}
	sample := metrics.OutboxSample{Rows: map[string]int64{
		contract.StatusPending: o.Pending, contract.StatusDispatching: o.Dispatching, "dispatched": o.Dispatched,
		"failed": o.Failed, "dead_letter": o.DeadLetter,
	}}
	now := time.Now()
	if o.Pending > 0 {
		_, sample.OldestPending = since(now, o.OldestPending)
	}
	if unacknowledged(o) > 0 {
		_, sample.OldestUnacknowledged = since(now, o.OldestUnacknowledged)
	}
	return sample, nil
}

// unacknowledged counts the rows of an OutboxOpen read the relay still has to bring home
// (dead letters wait for an operator instead).
func unacknowledged(o eventsdb.OutboxOpenRow) int64 {
	return o.Pending + o.Dispatching + o.Dispatched + o.Failed
}

// OutboxStats counts the outbox rows per status and dates the oldest waiting ones.
func (a *Admin) OutboxStats(ctx context.Context) (OutboxStats, error) {
	q := eventsdb.New(a.db)
	rows, err := q.OutboxStatusCounts(ctx)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("count outbox rows: %w", interpretError(err))
	}
	stats := OutboxStats{Counts: make(map[string]int64, len(contract.OutboxStatuses))}
	for _, s := range contract.OutboxStatuses {
		stats.Counts[s] = 0
	}
	for _, r := range rows {
		stats.Counts[r.Status] = r.Count
	}
	open, err := q.OutboxOpen(ctx)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("find oldest outbox rows: %w", interpretError(err))
	}
	now := time.Now()
	if open.Pending > 0 {
		stats.OldestPending, stats.OldestPendingAge = since(now, open.OldestPending)
	}
	if unacknowledged(open) > 0 {
		stats.OldestUnacknowledged, stats.OldestUnacknowledgedAge = since(now, open.OldestUnacknowledged)
	}
	return stats, nil
}

// MarshalJSON adds the ages in seconds, which scripts compare with thresholds.
func (s OutboxStats) MarshalJSON() ([]byte, error) {
	type plain OutboxStats
	return json.Marshal(struct {
		plain
		OldestPendingAgeSeconds        float64 `json:"oldest_pending_age_seconds"`
		OldestUnacknowledgedAgeSeconds float64 `json:"oldest_unacknowledged_age_seconds"`
	}{plain(s), s.OldestPendingAge.Seconds(), s.OldestUnacknowledgedAge.Seconds()})
}

func since(now time.Time, t time.Time) (*time.Time, time.Duration) {
	u := t.UTC()
	return &u, max(now.Sub(u), 0)
}

// ListOutbox returns up to limit rows in status, oldest id first.
func (a *Admin) ListOutbox(ctx context.Context, status string, limit int) ([]OutboxRow, error) {
	if err := checkStatus(status, contract.OutboxStatuses); err != nil {
		return nil, err
	}
	rows, err := eventsdb.New(a.db).ListOutbox(ctx, eventsdb.ListOutboxParams{Status: status, RowLimit: clampLimit(limit)})
	if err != nil {
		return nil, fmt.Errorf("list %s outbox rows: %w", status, interpretError(err))
	}
	return toOutboxRows(rows), nil
}

// GetOutbox returns the outbox row with this id, or contract.ErrNotFound.
func (a *Admin) GetOutbox(ctx context.Context, id uuid.UUID) (OutboxRow, error) {
	row, err := eventsdb.New(a.db).GetOutbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound):
		return OutboxRow{}, fmt.Errorf("outbox row %s: %w", id, err)
	case err != nil:
		return OutboxRow{}, fmt.Errorf("get outbox row %s: %w", id, err)
	}
	return toOutboxRow(row), nil
}

// RequeueOutbox sends the failed and dead_letter rows among ids back to pending with their
// attempts reset; the relay publishes them again. Other ids are refused, with their status.
func (a *Admin) RequeueOutbox(ctx context.Context, ids ...uuid.UUID) (Requeued, error) {
	q := eventsdb.New(a.db)
	moved, err := q.RequeueOutbox(ctx, ids)
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue outbox rows: %w", interpretError(err))
	}
	out := Requeued{IDs: orEmpty(moved)}
	for _, id := range ids {
		if slices.Contains(moved, id) || slices.ContainsFunc(out.Refused, func(r Refusal) bool { return r.ID == id }) {
			continue
		}
		row, err := q.GetOutbox(ctx, id)
		switch err := interpretError(err); {
		case errors.Is(err, contract.ErrNotFound):
			out.Refused = append(out.Refused, Refusal{ID: id})
		case err != nil:
			return out, fmt.Errorf("look up outbox row %s: %w", id, err)
		default:
			out.Refused = append(out.Refused, Refusal{ID: id, Status: row.Status})
		}
	}
	return out, nil
}

// RequeueOutboxStatus sends every row in status (failed or dead_letter) back to pending.
func (a *Admin) RequeueOutboxStatus(ctx context.Context, status string) (Requeued, error) {
	if err := checkStatus(status, contract.RequeueStatuses); err != nil {
		return Requeued{}, err
	}
	moved, err := eventsdb.New(a.db).RequeueOutboxByStatus(ctx, status)
	if err != nil {
		return Requeued{}, fmt.Errorf("requeue %s outbox rows: %w", status, interpretError(err))
	}
	return Requeued{IDs: orEmpty(moved)}, nil
}

// ReconcileStatuses are the statuses reconcile looks at: rows published, or given up on, whose
// acknowledgment may never come although the consumer has their effect.
var ReconcileStatuses = []string{"dispatched", "failed", "dead_letter"}

// PostedFunc tells whether the consuming service already has the effect of row (for the
// wallet: whether the GL posted the transfer row.AggregateID), with a note for the operator.
type PostedFunc func(ctx context.Context, row OutboxRow) (posted bool, note string, err error)

// Reconciled is one row reconcile moved (or, in a dry run, would move) to acknowledged.
type Reconciled struct {
	ID          uuid.UUID `json:"id"`
	AggregateID string    `json:"aggregate_id"`
	From        string    `json:"from"`
	Note        string    `json:"note,omitempty"`
}

// ReconcileReport is what a reconcile looked at and what it changed.
type ReconcileReport struct {
	DryRun    bool         `json:"dry_run"`
	Checked   int          `json:"checked"`
	Changed   []Reconciled `json:"changed"`
	NotPosted int          `json:"not_posted"`
}

// Reconcile is the clean-up of stuck historical events: each row in ReconcileStatuses whose
// effect the consumer already has (posted says so) is moved to acknowledged, so catch-up stops
// re-publishing it. With dryRun nothing changes; the report says what would.
func (a *Admin) Reconcile(ctx context.Context, posted PostedFunc, dryRun bool) (ReconcileReport, error) {
	const page = 200
	q := eventsdb.New(a.db)
	report := ReconcileReport{DryRun: dryRun, Changed: []Reconciled{}}
	after := uuid.Nil
	for {
		rows, err := q.ListOutboxAfter(ctx, eventsdb.ListOutboxAfterParams{Statuses: ReconcileStatuses, After: after, RowLimit: page})
		if err != nil {
			return report, fmt.Errorf("list outbox rows to reconcile: %w", interpretError(err))
		}
		for _, r := range rows {
			after = r.ID
			row := toOutboxRow(r)
			report.Checked++
			ok, note, err := posted(ctx, row)
			if err != nil {
				return report, fmt.Errorf("reconcile outbox row %s: %w", row.ID, err)
			}
			if !ok {
				report.NotPosted++
				continue
			}
			if !dryRun {
				n, err := q.AcknowledgeOutbox(ctx, []uuid.UUID{row.ID})
				if err != nil {
					return report, fmt.Errorf("acknowledge outbox row %s: %w", row.ID, interpretError(err))
				}
				if n == 0 {
					continue // acknowledged meanwhile by the consumer's answer
				}
			}
			report.Changed = append(report.Changed, Reconciled{ID: row.ID, AggregateID: row.AggregateID, From: row.Status, Note: note})
		}
		if len(rows) < page {
			return report, nil
		}
	}
}

// InboxStats is how many inbox rows are in each status and how many duplicates they absorbed.
type InboxStats struct {
	Counts     map[string]int64 `json:"counts"` // every status of contract.InboxStatuses, zeros included
	Duplicates int64            `json:"duplicates"`
	// FailedByReason splits the failed rows by reason: every word of contract.FailureReasons, zeros
	// included.
	FailedByReason map[string]int64 `json:"failed_by_reason"`
}

// InboxRow is one inbox row as an operator sees it.
type InboxRow struct {
	ID          string     `json:"id"`
	Consumer    string     `json:"consumer"`
	EventID     string     `json:"event_id"`
	EventType   string     `json:"event_type"`
	Status      string     `json:"status"`
	Attempts    int32      `json:"attempts"`
	Duplicates  int32      `json:"duplicates"`
	StreamSeq   *int64     `json:"stream_seq,omitempty"`
	Reason      string     `json:"reason,omitempty"`    // a failed row's reason word: malformed, conflict, exhausted, unauthenticated, abandoned
	Detail      string     `json:"detail,omitempty"`    // a failed row's error text, or why a waiting one waits
	WaitsFor    string     `json:"waits_for,omitempty"` // what a waiting row waits for: transfer:<id>, hold:<id>
	Payload     string     `json:"payload,omitempty"`   // the raw message, as text
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// A resolved row's closing: when, by which key, and the operator's reason.
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy string     `json:"resolved_by,omitempty"`
	Resolution string     `json:"resolution,omitempty"`
}

// InboxStats counts the inbox rows per status and the duplicates the inbox absorbed.
func (a *Admin) InboxStats(ctx context.Context) (InboxStats, error) {
	rows, err := eventsdb.New(a.db).InboxStatusCounts(ctx)
	if err != nil {
		return InboxStats{}, fmt.Errorf("count inbox rows: %w", interpretError(err))
	}
	stats := InboxStats{Counts: make(map[string]int64, len(contract.InboxStatuses))}
	for _, s := range contract.InboxStatuses {
		stats.Counts[s] = 0
	}
	for _, r := range rows {
		stats.Counts[r.Status] = r.Count
		stats.Duplicates += r.Duplicates
	}
	reasons, err := eventsdb.New(a.db).InboxFailureReasons(ctx)
	if err != nil {
		return InboxStats{}, fmt.Errorf("count failed inbox rows: %w", interpretError(err))
	}
	stats.FailedByReason = make(map[string]int64, len(contract.FailureReasons))
	for _, r := range contract.FailureReasons {
		stats.FailedByReason[r] = 0
	}
	for _, r := range reasons {
		stats.FailedByReason[r.Reason] = r.Count
	}
	return stats, nil
}

// ListInbox returns up to limit inbox rows in status, oldest first.
func (a *Admin) ListInbox(ctx context.Context, status string, limit int) ([]InboxRow, error) {
	if err := checkStatus(status, contract.InboxStatuses); err != nil {
		return nil, err
	}
	rows, err := eventsdb.New(a.db).ListInbox(ctx, eventsdb.ListInboxParams{Status: status, RowLimit: clampLimit(limit)})
	if err != nil {
		return nil, fmt.Errorf("list %s inbox rows: %w", status, interpretError(err))
	}
	out := make([]InboxRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, toInboxRow(r))
	}
	return out, nil
}

// ParseOutboxIDs parses outbox row ids given by an operator.
func ParseOutboxIDs(raw []string) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(raw))
	for _, s := range raw {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("outbox id %q is not a UUID", s)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func checkStatus(status string, allowed []string) error {
	if !slices.Contains(allowed, status) {
		return fmt.Errorf("%w %q: want one of %s", contract.ErrInvalidStatus, status, strings.Join(allowed, ", "))
	}
	return nil
}

// Listing limits of the operator API.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

func clampLimit(limit int) int32 {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return int32(limit)
}

func orEmpty(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

func toOutboxRows(rows []eventsdb.Outbox) []OutboxRow {
	out := make([]OutboxRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, toOutboxRow(r))
	}
	return out
}

func toOutboxRow(r eventsdb.Outbox) OutboxRow {
	return OutboxRow{
		ID: r.ID, EventType: r.EventType, AggregateID: r.AggregateID, Status: r.Status,
		Attempts: r.Attempts, PublishCount: r.PublishCount, LastError: deref(r.LastError),
		NextAttemptAt: r.NextAttemptAt, LeaseOwner: deref(r.LeaseOwner), LeaseUntil: r.LeaseUntil,
		StreamSeq: r.StreamSeq, CreatedAt: r.CreatedAt, DispatchedAt: r.DispatchedAt,
		AcknowledgedAt: r.AcknowledgedAt, UpdatedAt: r.UpdatedAt, Payload: r.Payload, TraceContext: deref(r.TraceContext),
		History: historyOf(r.AttemptHistory),
	}
}

func toInboxRow(r eventsdb.Inbox) InboxRow {
	return InboxRow{
		ID: r.ID, Consumer: r.Consumer, EventID: r.EventID, EventType: r.EventType, Status: r.Status,
		Attempts: r.Attempts, Duplicates: r.Duplicates, StreamSeq: r.StreamSeq, Reason: deref(r.Reason), Detail: deref(r.Detail),
		WaitsFor: deref(r.WaitsFor), Payload: string(r.Payload), ReceivedAt: r.ReceivedAt, ProcessedAt: r.ProcessedAt, UpdatedAt: r.UpdatedAt,
		ResolvedAt: r.ResolvedAt, ResolvedBy: deref(r.ResolvedBy), Resolution: deref(r.Resolution),
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Republished is the outcome of a republish: the period asked for, and how many acknowledged
// rows created in it went back to pending.
type Republished struct {
	Since    time.Time  `json:"since"`
	Until    *time.Time `json:"until,omitempty"` // nil: up to now
	Requeued int64      `json:"requeued"`
}

// RepublishOutbox sends the acknowledged rows created in [since, until) back to pending (until
// zero: no upper bound), so the relay publishes them again under their own ids: a stream that lost
// its history is rebuilt, and the consumers' inboxes recognise the events they already applied (an
// inbox.DuplicateHandler answers them again, which brings the rows back to acknowledged). It needs
// a pool or a transaction: the transition is allowed only inside the transaction that asks for it
// (db/schema/events/00005).
func (a *Admin) RepublishOutbox(ctx context.Context, since, until time.Time) (Republished, error) {
	out := Republished{Since: since.UTC()}
	params := eventsdb.RepublishOutboxParams{Since: since}
	if !until.IsZero() {
		if !until.After(since) {
			return out, fmt.Errorf("republish: the end of the period (%s) must be after its start (%s)", until.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
		}
		u := until.UTC()
		out.Until, params.Until = &u, &u
	}
	db, ok := a.db.(database.TxBeginner)
	if !ok {
		return out, errors.New("republish: the operator API needs a pool or a transaction to begin one")
	}
	// An operator's command, run again if it fails: no retry.
	n, err := database.WithTxV(ctx, db, func(tx pgx.Tx) (int64, error) {
		q := eventsdb.New(tx)
		if err := q.AllowOutboxRepublish(ctx); err != nil {
			return 0, fmt.Errorf("allow the transition: %w", err)
		}
		n, err := q.RepublishOutbox(ctx, params)
		if err != nil {
			return 0, fmt.Errorf("move acknowledged outbox rows to pending: %w", err)
		}
		if n > 0 {
			if err := q.NotifyOutboxRelays(ctx); err != nil {
				return 0, fmt.Errorf("notify the relays: %w", err)
			}
		}
		return n, nil
	})
	if err != nil {
		return out, fmt.Errorf("republish: %w", interpretError(err))
	}
	out.Requeued = n
	return out, nil
}
