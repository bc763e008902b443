package httpapi

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/auth"
	"walletgl/internal/console"
	"walletgl/internal/gl"
	"walletgl/internal/money"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// Ledger is what the GL's ledger pages read: the same reader the GL's HTTP API answers from,
// and the chart of accounts.
type Ledger interface {
	gl.Reader
	Accounts(ctx context.Context) ([]gl.Account, error)
}

// Books is the GL's ledger pages: the trial balance, an account's balance as of a time and its
// statement, the entries of a transfer or an event.
type Books struct {
	Ledger Ledger
	Scope  auth.Scope // to look (ledger:read)
}

// Pages are the ledger pages.
func (b Books) Pages() []console.Page {
	return []console.Page{
		{Pattern: "GET /console/trial-balance", Scope: b.Scope, Nav: "Trial balance", Path: "/console/trial-balance", Func: b.trialBalance},
		{Pattern: "GET /console/accounts", Scope: b.Scope, Nav: "Accounts", Path: "/console/accounts", Func: b.account},
		{Pattern: "GET /console/entries", Scope: b.Scope, Nav: "Entries", Path: "/console/entries", Func: b.entries},
	}
}

func (b Books) trialBalance(ctx context.Context, _ *console.Request) (console.View, error) {
	tb, err := b.Ledger.TrialBalance(ctx)
	if err != nil {
		return console.View{}, err
	}
	return console.View{Template: "trial_balance", Title: "Trial balance", Data: tb}, nil
}

type accountData struct {
	Accounts  []gl.Account
	Code      string
	Currency  string
	AsOf      string // as the form gave it
	Balance   *gl.AccountBalance
	Statement *gl.Statement
	NextURL   string
	FirstURL  string
}

// account shows an account's balance as of a time (none: now) and a page of its statement.
func (b Books) account(ctx context.Context, req *console.Request) (console.View, error) {
	q, err := web.Query(req.Request)
	if err != nil {
		return console.View{}, err
	}
	d := accountData{Code: q.Get("code"), Currency: strings.ToUpper(strings.TrimSpace(q.Get("currency"))), AsOf: q.Get("as_of")}
	if d.Accounts, err = b.Ledger.Accounts(ctx); err != nil {
		return console.View{}, err
	}
	if d.Currency == "" {
		d.Currency = "USD"
	}
	view := console.View{Template: "account", Title: "Accounts", Data: &d}
	if d.Code == "" {
		return view, nil
	}
	if _, err := money.Parse(d.Currency); err != nil {
		return console.View{}, err
	}
	asOf, err := parseAsOf(d.AsOf)
	if err != nil {
		return console.View{}, err
	}
	bal, err := b.Ledger.AccountBalance(ctx, d.Code, d.Currency, asOf)
	if errors.Is(err, gl.ErrAccountNotFound) {
		return console.View{}, problem.Newf(gl.ErrAccountNotFound, "account %q is not in the chart of accounts", d.Code)
	}
	if err != nil {
		return console.View{}, err
	}
	st, err := b.Ledger.Statement(ctx, gl.StatementQuery{AccountCode: d.Code, Currency: d.Currency, After: q.Get("after"), Limit: console.PageSize})
	if err != nil {
		return console.View{}, err
	}
	d.Balance, d.Statement = &bal, &st
	base := url.Values{"code": {d.Code}, "currency": {d.Currency}}
	if d.AsOf != "" {
		base.Set("as_of", d.AsOf)
	}
	d.FirstURL = "/console/accounts?" + base.Encode()
	if st.NextCursor != "" {
		base.Set("after", st.NextCursor)
		d.NextURL = "/console/accounts?" + base.Encode()
	}
	view.Title = "Account " + d.Code + " " + d.Currency
	return view, nil
}

// parseAsOf reads the form's time: RFC 3339, or a browser's datetime-local value taken as UTC.
func parseAsOf(s string) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, problem.Newf(console.ErrInvalid, "the time must be such as 2026-01-02T15:04:05Z (UTC), got %q", s)
}

type entriesData struct {
	ID      string
	Found   string // "transfer" or "event": what the id named
	Entries []gl.Entry
	NextURL string
	Recent  bool // no id asked: the first entries by posting time
}

// entries shows the entry of a transfer or an event id, or a page of entries by posting time.
func (b Books) entries(ctx context.Context, req *console.Request) (console.View, error) {
	q, err := web.Query(req.Request)
	if err != nil {
		return console.View{}, err
	}
	d := entriesData{ID: strings.TrimSpace(q.Get("id"))}
	view := console.View{Template: "entries", Title: "Entries", Data: &d}
	if d.ID == "" {
		page, err := b.Ledger.Entries(ctx, gl.EntryQuery{After: q.Get("after"), Limit: console.PageSize})
		if err != nil {
			return console.View{}, err
		}
		d.Recent, d.Entries = true, page.Entries
		if page.NextCursor != "" {
			d.NextURL = "/console/entries?" + url.Values{"after": {page.NextCursor}}.Encode()
		}
		return view, nil
	}
	if _, err := uuid.Parse(d.ID); (err != nil || len(d.ID) != 36) && !gl.IsAdjustmentKey(d.ID) {
		return console.View{}, problem.Newf(console.ErrInvalid, "a transfer or event id is a UUID such as 0193a5c2-7e41-7d7b-8f7e-2f4f7c1a9b10, got %q", d.ID)
	}
	if d.Entries, err = b.Ledger.EntriesByTransfer(ctx, d.ID); err != nil {
		return console.View{}, err
	}
	d.Found = "transfer"
	if len(d.Entries) == 0 {
		if d.Entries, err = b.Ledger.EntriesByEvent(ctx, d.ID); err != nil {
			return console.View{}, err
		}
		d.Found = "event"
	}
	if len(d.Entries) == 0 {
		d.Found = ""
	}
	return view, nil
}
