package httpapi

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"

	"walletgl/internal/gl"
	"walletgl/internal/problem"
)

// Problems of the API's own; the ledger's (account-not-found, unavailable) come from gl.
var (
	errInvalidTransferID = problem.New(problem.Invalid, "invalid-transfer-id", "the transfer_id query parameter is required")
	errInvalidCurrency   = problem.New(problem.Invalid, "invalid-currency", "the currency query parameter must be a three-letter upper-case code")
	errNotFound          = problem.New(problem.NotFound, "not-found", "no such resource")
)

const maxTransferIDLen = 256

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

func handleHealthz(health func(ctx context.Context) error) http.Handler {
	type response struct {
		Status string `json:"status"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := health(r.Context()); err != nil {
			fail(w, r, problem.New(problem.Unavailable, gl.ErrUnavailable.Slug, err.Error()))
			return
		}
		encode(w, r, http.StatusOK, response{Status: "ok"})
	})
}

func handleEntries(ledger gl.Reader) http.Handler {
	type line struct {
		AccountCode string       `json:"account_code"`
		Direction   gl.Direction `json:"direction"`
		Amount      int64        `json:"amount"`
	}
	type entry struct {
		ID         string    `json:"id"`
		EventID    string    `json:"event_id"`
		TransferID string    `json:"transfer_id"`
		Currency   string    `json:"currency"`
		PostedAt   time.Time `json:"posted_at"`
		Lines      []line    `json:"lines"`
	}
	type response struct {
		Entries []entry `json:"entries"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transferID := r.URL.Query().Get("transfer_id")
		switch {
		case transferID == "":
			fail(w, r, errInvalidTransferID)
			return
		case len(transferID) > maxTransferIDLen:
			fail(w, r, problem.Newf(errInvalidTransferID, "transfer_id is longer than %d characters", maxTransferIDLen))
			return
		}
		entries, err := ledger.EntriesByTransfer(r.Context(), transferID)
		if err != nil {
			fail(w, r, err)
			return
		}
		resp := response{Entries: make([]entry, 0, len(entries))}
		for _, e := range entries {
			out := entry{
				ID: e.ID.String(), EventID: e.EventID, TransferID: e.TransferID, Currency: e.Currency,
				PostedAt: e.PostedAt.UTC(), Lines: make([]line, 0, len(e.Lines)),
			}
			for _, l := range e.Lines {
				out.Lines = append(out.Lines, line{AccountCode: l.AccountCode, Direction: l.Direction, Amount: l.Amount})
			}
			resp.Entries = append(resp.Entries, out)
		}
		encode(w, r, http.StatusOK, resp)
	})
}

func handleAccountBalance(ledger gl.Reader) http.Handler {
	type response struct {
		AccountCode string `json:"account_code"`
		Currency    string `json:"currency"`
		Debits      int64  `json:"debits"`
		Credits     int64  `json:"credits"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := r.PathValue("code")
		currency := r.URL.Query().Get("currency")
		if !currencyCode.MatchString(currency) {
			fail(w, r, errInvalidCurrency)
			return
		}
		balance, err := ledger.AccountBalance(r.Context(), code, currency)
		if errors.Is(err, gl.ErrAccountNotFound) {
			fail(w, r, problem.Newf(gl.ErrAccountNotFound, "account %q is not in the chart of accounts", code))
			return
		}
		if err != nil {
			fail(w, r, err)
			return
		}
		encode(w, r, http.StatusOK, response{
			AccountCode: balance.AccountCode, Currency: balance.Currency, Debits: balance.Debits, Credits: balance.Credits,
		})
	})
}

func handleTrialBalance(ledger gl.Reader) http.Handler {
	type account struct {
		AccountCode string `json:"account_code"`
		Currency    string `json:"currency"`
		Debits      int64  `json:"debits"`
		Credits     int64  `json:"credits"`
	}
	type currency struct {
		Currency string `json:"currency"`
		Debits   int64  `json:"debits"`
		Credits  int64  `json:"credits"`
		Balanced bool   `json:"balanced"`
	}
	type response struct {
		Accounts   []account  `json:"accounts"`
		Currencies []currency `json:"currencies"`
		Balanced   bool       `json:"balanced"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb, err := ledger.TrialBalance(r.Context())
		if err != nil {
			fail(w, r, err)
			return
		}
		resp := response{
			Accounts:   make([]account, 0, len(tb.Accounts)),
			Currencies: make([]currency, 0, len(tb.Currencies)),
			Balanced:   tb.Balanced,
		}
		for _, a := range tb.Accounts {
			resp.Accounts = append(resp.Accounts, account(a))
		}
		for _, c := range tb.Currencies {
			resp.Currencies = append(resp.Currencies, currency(c))
		}
		encode(w, r, http.StatusOK, resp)
	})
}

func handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, r, errNotFound)
	})
}
