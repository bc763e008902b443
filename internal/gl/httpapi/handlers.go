package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/gl"
	"walletgl/internal/metadata"
	"walletgl/internal/money"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// Problems of the API's own; the ledger's (account-not-found, unavailable) come from gl.
var (
	errInvalidTransferID = problem.New(problem.Invalid, "invalid-transfer-id", "the transfer_id query parameter is not valid")
	errInvalidEventID    = problem.New(problem.Invalid, "invalid-event-id", "the event_id query parameter is not valid")
	errInvalidTime       = problem.New(problem.Invalid, "invalid-time", "a timestamp parameter is not RFC 3339")
)

// isUUID reports whether s is a UUID in its canonical 36-character form, as every transfer
// and event id the wallet makes is: anything else names nothing, and is a bad request.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

// queryCurrency reads the required currency query parameter: an upper-case ISO 4217 code, or
// money.ErrInvalidCurrency.
func queryCurrency(query url.Values) (string, error) {
	c := query.Get("currency")
	if !query.Has("currency") {
		return "", problem.Newf(money.ErrInvalidCurrency, "the currency query parameter is required: an ISO 4217 code such as USD")
	}
	if _, err := money.Parse(c); err != nil {
		return "", err
	}
	return c, nil
}

var errInvalidWalletID = problem.New(problem.Invalid, "invalid-wallet-id", "the wallet_id query parameter must be 1 to 64 letters, digits, '_' or '-'")

// optionalWalletID reads the wallet_id query parameter: "" when absent.
func optionalWalletID(query url.Values) (string, error) {
	id := query.Get("wallet_id")
	if _, given := query["wallet_id"]; given && !gl.ValidWalletID(id) {
		return "", errInvalidWalletID
	}
	return id, nil
}

// entryJSON is an entry as the API shows it.
type entryJSON struct {
	ID         string    `json:"id"`
	EventID    string    `json:"event_id"`
	TransferID string    `json:"transfer_id"`
	Currency   string    `json:"currency"`
	OccurredAt time.Time `json:"occurred_at"`
	PostedAt   time.Time `json:"posted_at"`
	// EventType and Kind are the key of the posting rule the entry was posted by (gl rules).
	EventType string `json:"event_type,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// ReversesEntryID is set on a reversal's entry, ReversedBy on an entry reversed.
	ReversesEntryID *string  `json:"reverses_entry_id,omitempty"`
	ReversedBy      []string `json:"reversed_by,omitempty"`
	// HoldID is set on a hold's placement or release; TransferID is then its movement key.
	HoldID string `json:"hold_id,omitempty"`
	// Adjustment, AdjustmentID and Reason are set on a manual adjustment's entry (POST
	// /v1/adjustments).
	Adjustment   bool   `json:"adjustment,omitempty"`
	AdjustmentID string `json:"adjustment_id,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Metadata are the client's key-value pairs of the transfer the entry posts; {} when none.
	Metadata metadata.Metadata `json:"metadata"`
	Lines    []lineJSON        `json:"lines"`
}

type lineJSON struct {
	AccountCode string       `json:"account_code"`
	Direction   gl.Direction `json:"direction"`
	Amount      int64        `json:"amount"`
	WalletID    string       `json:"wallet_id,omitempty"` // the wallet whose sub-account the line is on
	Currency    string       `json:"currency"`
	TransferID  string       `json:"transfer_id,omitempty"` // a batch entry's leg tag
	LegKind     string       `json:"leg_kind,omitempty"`    // the kind whose rule made a batch leg's line
}

func entriesJSON(entries []gl.Entry) []entryJSON {
	out := make([]entryJSON, 0, len(entries))
	for _, e := range entries {
		j := entryJSON{
			ID: e.ID.String(), EventID: e.EventID, TransferID: e.TransferID, Currency: e.Currency,
			OccurredAt: e.OccurredAt.UTC(), PostedAt: e.PostedAt.UTC(), HoldID: e.HoldID, EventType: e.EventType, Kind: e.Kind,
			Metadata: e.Metadata, Lines: make([]lineJSON, 0, len(e.Lines)),
		}
		if j.Metadata == nil {
			j.Metadata = metadata.Metadata{}
		}
		for _, l := range e.Lines {
			j.Lines = append(j.Lines, lineJSON{AccountCode: l.AccountCode, Direction: l.Direction, Amount: l.Amount, WalletID: l.WalletID,
				Currency: e.LineCurrency(l), TransferID: l.TransferID, LegKind: l.LegKind})
		}
		if e.IsAdjustment() {
			j.Adjustment, j.Reason = true, e.Reason
			if e.AdjustmentID != uuid.Nil {
				j.AdjustmentID = e.AdjustmentID.String()
			}
		}
		if e.ReversesEntryID != uuid.Nil {
			id := e.ReversesEntryID.String()
			j.ReversesEntryID = &id
		}
		for _, id := range e.ReversedBy {
			j.ReversedBy = append(j.ReversedBy, id.String())
		}
		out = append(out, j)
	}
	return out
}

// entriesOf answers the entries of one transfer or event: id, the query parameter name, must be a
// UUID, or for a transfer_id a hold entry's key (gl.IsHoldKey) or an adjustment's
// (gl.IsAdjustmentKey); invalid: the parameter's problem.
func entriesOf(w http.ResponseWriter, r *http.Request, name, id string, invalid *problem.Error,
	find func(context.Context, string) ([]gl.Entry, error)) {
	if !isUUID(id) && !(name == "transfer_id" && (gl.IsHoldKey(id) || gl.IsAdjustmentKey(id))) {
		web.WriteProblem(w, r, problem.Newf(invalid, "%s must be a UUID such as 0193a5c2-7e41-7d7b-8f7e-2f4f7c1a9b10, got %q", name, id))
		return
	}
	entries, err := find(r.Context(), id)
	if err != nil {
		web.WriteProblem(w, r, err)
		return
	}
	web.Encode(w, r, http.StatusOK, struct {
		Entries []entryJSON `json:"entries"`
	}{entriesJSON(entries)})
}

// handleEntries answers one of three questions: the entries of a transfer (transfer_id), of an
// event (event_id), or a page of entries by posting time (from, to, after, limit; all optional).
func handleEntries(ledger gl.Reader) http.Handler {
	type pageResponse struct {
		Entries    []entryJSON `json:"entries"`
		NextCursor *string     `json:"next_cursor"` // null on the last page
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		transferID, eventID := query.Get("transfer_id"), query.Get("event_id")
		filter, err := metadata.FromQuery(query)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		ranged := query.Has("from") || query.Has("to") || query.Has("after") || query.Has("limit") || len(filter) > 0
		switch {
		case query.Has("transfer_id") && (query.Has("event_id") || ranged), query.Has("event_id") && ranged:
			web.WriteProblem(w, r, problem.Newf(web.ErrInvalidQuery, "use transfer_id, event_id, or from/to/after/limit/metadata[...]; not several"))
			return
		case query.Has("transfer_id"):
			entriesOf(w, r, "transfer_id", transferID, errInvalidTransferID, ledger.EntriesByTransfer)
			return
		case query.Has("event_id"):
			entriesOf(w, r, "event_id", eventID, errInvalidEventID, ledger.EntriesByEvent)
			return
		}
		var q gl.EntryQuery
		if q.From, q.To, err = parseRange(query); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if q.Limit, err = web.Limit(query, gl.DefaultPageSize, gl.MaxPageSize); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		q.After, q.Metadata = query.Get("after"), filter
		page, err := ledger.Entries(r.Context(), q)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		resp := pageResponse{Entries: entriesJSON(page.Entries)}
		if page.NextCursor != "" {
			resp.NextCursor = &page.NextCursor
		}
		web.Encode(w, r, http.StatusOK, resp)
	})
}

func handleAccountBalance(ledger gl.Reader) http.Handler {
	type response struct {
		AccountCode   string       `json:"account_code"`
		Currency      string       `json:"currency"`
		MinorUnits    int          `json:"minor_units"`
		WalletID      string       `json:"wallet_id,omitempty"` // absent: the whole account
		NormalBalance gl.Direction `json:"normal_balance"`
		AsOf          *time.Time   `json:"as_of"` // null: everything posted so far
		Debits        gl.Sum       `json:"debits"`
		Credits       gl.Sum       `json:"credits"`
		Balance       gl.Sum       `json:"balance"` // in the normal-balance sign: positive on the account's normal side
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		code := r.PathValue("code")
		currency, err := queryCurrency(query)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		minor, _ := money.Parse(currency) // queryCurrency checked it
		asOf, err := parseTime(query, "as_of")
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		wallet, err := optionalWalletID(query)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		var balance gl.AccountBalance
		if wallet == "" {
			balance, err = ledger.AccountBalance(r.Context(), code, currency, asOf)
		} else {
			balance, err = ledger.WalletBalance(r.Context(), code, currency, wallet, asOf)
		}
		if errors.Is(err, gl.ErrAccountNotFound) {
			web.WriteProblem(w, r, problem.Newf(gl.ErrAccountNotFound, "account %q is not in the chart of accounts", code))
			return
		}
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		resp := response{
			AccountCode: balance.AccountCode, Currency: balance.Currency, MinorUnits: minor.MinorUnits, NormalBalance: balance.NormalBalance,
			Debits: balance.Debits, Credits: balance.Credits, Balance: balance.Balance(),
		}
		if wallet != "" {
			resp.WalletID = wallet
		}
		if balance.AsOf != nil {
			t := balance.AsOf.UTC()
			resp.AsOf = &t
		}
		web.Encode(w, r, http.StatusOK, resp)
	})
}

func handleAccountStatement(ledger gl.Reader) http.Handler {
	type line struct {
		LineID         int64        `json:"line_id"`
		EntryID        string       `json:"entry_id"`
		EventID        string       `json:"event_id"`
		TransferID     string       `json:"transfer_id"`
		Adjustment     bool         `json:"adjustment,omitempty"` // the line is a manual adjustment's
		Direction      gl.Direction `json:"direction"`
		Amount         int64        `json:"amount"`
		PostedAt       time.Time    `json:"posted_at"`
		RunningBalance gl.Sum       `json:"running_balance"`
	}
	type response struct {
		AccountCode   string       `json:"account_code"`
		Currency      string       `json:"currency"`
		MinorUnits    int          `json:"minor_units"`
		WalletID      string       `json:"wallet_id,omitempty"` // absent: the whole account
		NormalBalance gl.Direction `json:"normal_balance"`
		Lines         []line       `json:"lines"`
		NextCursor    *string      `json:"next_cursor"` // null on the last page
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		q := gl.StatementQuery{AccountCode: r.PathValue("code"), After: query.Get("after")}
		if q.Currency, err = queryCurrency(query); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if q.From, q.To, err = parseRange(query); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if q.Limit, err = web.Limit(query, gl.DefaultPageSize, gl.MaxPageSize); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if q.WalletID, err = optionalWalletID(query); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		minor, _ := money.Parse(q.Currency) // queryCurrency checked it
		st, err := ledger.Statement(r.Context(), q)
		if errors.Is(err, gl.ErrAccountNotFound) {
			web.WriteProblem(w, r, problem.Newf(gl.ErrAccountNotFound, "account %q is not in the chart of accounts", q.AccountCode))
			return
		}
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		resp := response{
			AccountCode: st.Account.Code, Currency: st.Currency, NormalBalance: st.Account.NormalBalance,
			MinorUnits: minor.MinorUnits, Lines: make([]line, 0, len(st.Lines)),
		}
		if q.WalletID != "" {
			resp.WalletID = q.WalletID
		}
		for _, l := range st.Lines {
			resp.Lines = append(resp.Lines, line{
				LineID: l.LineID, EntryID: l.EntryID.String(), EventID: l.EventID, TransferID: l.TransferID, Adjustment: l.Adjustment,
				Direction: l.Direction, Amount: l.Amount, PostedAt: l.PostedAt.UTC(), RunningBalance: l.RunningBalance,
			})
		}
		if st.NextCursor != "" {
			resp.NextCursor = &st.NextCursor
		}
		web.Encode(w, r, http.StatusOK, resp)
	})
}

// parseTime reads an optional RFC 3339 timestamp: nil when absent. Any time given is a time,
// 0001-01-01T00:00:00Z (Go's zero time) included.
// parseRange reads the optional bounds from (inclusive) and to (exclusive) of a time range.
func parseRange(query url.Values) (from, to *time.Time, err error) {
	if from, err = parseTime(query, "from"); err != nil {
		return nil, nil, err
	}
	if to, err = parseTime(query, "to"); err != nil {
		return nil, nil, err
	}
	return from, to, nil
}

func parseTime(query url.Values, name string) (*time.Time, error) {
	raw := query.Get(name)
	if raw == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return nil, problem.Newf(errInvalidTime, "%s must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z, got %q", name, raw)
	}
	return &t, nil
}

func handleTrialBalance(ledger gl.Reader) http.Handler {
	type account struct {
		AccountCode   string       `json:"account_code"`
		Currency      string       `json:"currency"`
		NormalBalance gl.Direction `json:"normal_balance"`
		Debits        gl.Sum       `json:"debits"`
		Credits       gl.Sum       `json:"credits"`
		Balance       gl.Sum       `json:"balance"` // as handleAccountBalance's: positive on the normal side
	}
	type currency struct {
		Currency   string `json:"currency"`
		MinorUnits *int   `json:"minor_units"` // null: a code that is no ISO 4217 currency
		Debits     gl.Sum `json:"debits"`
		Credits    gl.Sum `json:"credits"`
		Balanced   bool   `json:"balanced"`
	}
	type response struct {
		AsOf       *time.Time `json:"as_of"` // null: everything posted so far
		Accounts   []account  `json:"accounts"`
		Currencies []currency `json:"currencies"`
		Balanced   bool       `json:"balanced"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		asOf, err := parseTime(query, "as_of")
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		tb, err := ledger.TrialBalanceAsOf(r.Context(), asOf)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		resp := response{
			Accounts:   make([]account, 0, len(tb.Accounts)),
			Currencies: make([]currency, 0, len(tb.Currencies)),
			Balanced:   tb.Balanced,
		}
		if tb.AsOf != nil {
			t := tb.AsOf.UTC()
			resp.AsOf = &t
		}
		for _, a := range tb.Accounts {
			resp.Accounts = append(resp.Accounts, account{
				AccountCode: a.AccountCode, Currency: a.Currency, NormalBalance: a.NormalBalance,
				Debits: a.Debits, Credits: a.Credits, Balance: a.Balance(),
			})
		}
		for _, c := range tb.Currencies {
			out := currency{Currency: c.Currency, Debits: c.Debits, Credits: c.Credits, Balanced: c.Balanced}
			if m, err := money.Parse(c.Currency); err == nil {
				out.MinorUnits = &m.MinorUnits
			}
			resp.Currencies = append(resp.Currencies, out)
		}
		web.Encode(w, r, http.StatusOK, resp)
	})
}
