package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
)

// Browse is a page request of the operator console: the rows of one status after a cursor (the
// last id of the previous page; empty for the first), narrowed by Filter (a row's id, aggregate
// or event id or type, or a piece of its error text; empty for all), up to Limit rows.
type Browse struct {
	Status string
	After  string
	Filter string
	Limit  int
}

// OutboxPage is a page of outbox rows in id order; Next is the cursor of the following page,
// empty on the last.
type OutboxPage struct {
	Rows []OutboxRow
	Next string
}

// InboxPage is a page of inbox rows in id order; Next is the cursor of the following page,
// empty on the last.
type InboxPage struct {
	Rows []InboxRow
	Next string
}

// The outbox browse's statuses beside the six of contract.OutboxStatuses: every row not
// acknowledged (whatever its status), and every row.
const (
	BrowseUnacknowledged = "unacknowledged"
	BrowseAll            = "all"
)

// OutboxBrowseStatuses are what Browse.Status may be for the outbox, in the order the console
// offers them: the rows that need attention first, then each status, then all.
var OutboxBrowseStatuses = append(append([]string{BrowseUnacknowledged}, contract.OutboxStatuses...), BrowseAll)

// BrowseOutbox returns a page of the outbox rows of b.Status: one status, every row not
// acknowledged (BrowseUnacknowledged) or every row (BrowseAll).
func (a *Admin) BrowseOutbox(ctx context.Context, b Browse) (OutboxPage, error) {
	if err := checkStatus(b.Status, OutboxBrowseStatuses); err != nil {
		return OutboxPage{}, err
	}
	after := uuid.Nil
	if b.After != "" {
		var err error
		if after, err = uuid.Parse(b.After); err != nil {
			return OutboxPage{}, fmt.Errorf("%w: the cursor %q is not an outbox id", ErrInvalidCursor, b.After)
		}
	}
	limit := clampLimit(b.Limit)
	rows, err := a.browseOutboxRows(ctx, b.Status, after, b.Filter, limit+1) // one more: is there a next page?
	if err != nil {
		return OutboxPage{}, fmt.Errorf("browse %s outbox rows: %w", b.Status, interpretError(err))
	}
	page := OutboxPage{Rows: toOutboxRows(rows[:min(len(rows), int(limit))])}
	if len(rows) > int(limit) {
		page.Next = page.Rows[len(page.Rows)-1].ID.String()
	}
	return page, nil
}

// browseOutboxRows runs the query of status, each read through its own index.
func (a *Admin) browseOutboxRows(ctx context.Context, status string, after uuid.UUID, filter string, limit int32) ([]eventsdb.Outbox, error) {
	q := eventsdb.New(a.db)
	switch status {
	case BrowseUnacknowledged:
		return q.BrowseOutboxUnacknowledged(ctx, eventsdb.BrowseOutboxUnacknowledgedParams{After: after, Filter: filter, RowLimit: limit})
	case BrowseAll:
		return q.BrowseOutboxAll(ctx, eventsdb.BrowseOutboxAllParams{After: after, Filter: filter, RowLimit: limit})
	}
	return q.BrowseOutbox(ctx, eventsdb.BrowseOutboxParams{Status: status, After: after, Filter: filter, RowLimit: limit})
}

// BrowseInbox returns a page of the inbox rows of b.Status.
func (a *Admin) BrowseInbox(ctx context.Context, b Browse) (InboxPage, error) {
	if err := checkStatus(b.Status, contract.InboxStatuses); err != nil {
		return InboxPage{}, err
	}
	limit := clampLimit(b.Limit)
	rows, err := eventsdb.New(a.db).BrowseInbox(ctx, eventsdb.BrowseInboxParams{
		Status: b.Status, After: b.After, Filter: b.Filter, RowLimit: limit + 1,
	})
	if err != nil {
		return InboxPage{}, fmt.Errorf("browse %s inbox rows: %w", b.Status, interpretError(err))
	}
	page := InboxPage{Rows: make([]InboxRow, 0, min(len(rows), int(limit)))}
	for _, r := range rows[:min(len(rows), int(limit))] {
		page.Rows = append(page.Rows, toInboxRow(r))
	}
	if len(rows) > int(limit) {
		page.Next = page.Rows[len(page.Rows)-1].ID
	}
	return page, nil
}

// GetInbox returns the inbox row with this id ("<consumer>:<event id>"), or contract.ErrNotFound.
func (a *Admin) GetInbox(ctx context.Context, id string) (InboxRow, error) {
	row, err := eventsdb.New(a.db).GetInbox(ctx, id)
	switch err := interpretError(err); {
	case errors.Is(err, contract.ErrNotFound):
		return InboxRow{}, fmt.Errorf("inbox row %s: %w", id, err)
	case err != nil:
		return InboxRow{}, fmt.Errorf("get inbox row %s: %w", id, err)
	}
	return toInboxRow(row), nil
}

// ErrInvalidCursor says a page cursor is not one this API gave out.
var ErrInvalidCursor = errors.New("invalid cursor")
