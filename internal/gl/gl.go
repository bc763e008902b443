// Package gl owns the general ledger's domain: journal entries and their lines, the posting
// rules and the functions that turn each event of the wallet into a balanced entry by them
// (TransferEntry, PlacementEntry, ReleaseEntry, ReversalEntry, CheckPosting), and the reports
// read from the ledger (entries of a transfer, account balances, the trial balance). Storage
// lives in the postgres adapter, the inbox handler that posts events in posting, HTTP in
// httpapi; cmd/gl wires them together.
package gl

import (
	"context"
	"errors"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"walletgl/internal/metadata"
	"walletgl/internal/problem"
)

// Direction is the side of an account a line is posted to.
type Direction string

// The two directions of double-entry bookkeeping.
const (
	Debit  Direction = "debit"
	Credit Direction = "credit"
)

// Valid reports whether d is debit or credit.
func (d Direction) Valid() bool { return d == Debit || d == Credit }

// MultiCurrency is the currency of an entry whose lines are in several currencies (a batch's
// legs): ISO 4217's "XXX", no currency. Such an entry balances in each of its lines' currencies.
const MultiCurrency = "XXX"

// Entry is a journal entry: one business event posted as lines that balance in each currency,
// all in its Currency unless that is MultiCurrency.
type Entry struct {
	ID          uuid.UUID
	EventID     string // the event that caused the entry; unique, like TransferID
	TransferID  string
	Currency    string
	Description string
	OccurredAt  time.Time // when the transfer happened in the wallet
	PostedAt    time.Time // when the GL committed the entry; set by the ledger
	Lines       []Line
	// EventType and Kind name the posting rule the entry was posted by (with OccurredAt, its
	// time): the event's type and the transfer's kind. A reversal's entry, which swaps its
	// original's lines and reads no rule, carries its own event's type (TransferReversed.v1)
	// and its original's kind.
	EventType string
	Kind      string
	// ReversesEntryID is, for a reversal's entry, the entry it reverses (uuid.Nil otherwise).
	ReversesEntryID uuid.UUID
	// ReversedBy are the entries reversing this one, oldest first, where the ledger reads
	// entries (not set by a posting).
	ReversedBy []uuid.UUID
	// HoldID is, for a hold's placement or release (hold.go), the hold's id ("" otherwise);
	// TransferID is then the movement's key, HoldPlacedKey or HoldReleasedKey.
	HoldID string
	// AdjustmentID and Reason are, for an adjustment's entry (IsAdjustment, adjustment.go), its
	// adjustment and why it was made, where the ledger reads entries (uuid.Nil and "" otherwise).
	AdjustmentID uuid.UUID
	Reason       string
	// Metadata are the client's key-value pairs of the movement the entry posts, as its event
	// carried them: a transfer's (TransferCompleted.v2), a reversal's (TransferReversed.v1), a
	// hold's on its placement (HoldPlaced.v1); empty for a release and an adjustment.
	Metadata metadata.Metadata
}

// Line is one amount on one account, in minor units of its currency. WalletID is
// the wallet on the line's side of the movement (WalletLines), "" for none: on a control
// account of wallets (2010, 2020) it names the sub-account the line belongs to, and the
// database refuses such a line without one.
type Line struct {
	AccountCode string
	Direction   Direction
	Amount      int64
	WalletID    string
	// Currency is the line's currency; "" is the entry's (Entry.LineCurrency). The ledger
	// reads it as "" where it is the entry's.
	Currency string
	// TransferID is the line's leg tag on a batch's entry (batch.go): the leg's transfer id, or
	// on a batch reversal's entry the leg reversal's id; "" on every other entry.
	TransferID string
	// LegKind is, on a batch leg's line, the kind whose TransferCompleted.v2 rule made it; on a
	// batch reversal's line, the kind of the line it reverses. "" on every other line, and on
	// legs the ledger posted before it kept their kind.
	LegKind string
	// ReversesLineID is, on a batch reversal's line, the line it reverses (0: none).
	ReversesLineID int64
	// ID and Reversed are the stored line's id and whether a batch reversal's line reverses
	// it, where the ledger reads a batch's lines (Entry.IsBatch; not set by a posting).
	ID       int64
	Reversed bool
}

// LineCurrency is the currency of l, a line of e.
func (e Entry) LineCurrency(l Line) string {
	if l.Currency != "" {
		return l.Currency
	}
	return e.Currency
}

// Balanced reports whether e can be posted: every amount positive and every direction known,
// every line in the entry's currency unless it is MultiCurrency, and in each currency at least
// one debit and one credit, debits equal to credits (without overflow).
func (e Entry) Balanced() bool {
	type totals struct {
		debits, credits   int64
		nDebits, nCredits int
	}
	byCurrency := map[string]*totals{}
	for _, l := range e.Lines {
		if l.Amount <= 0 || l.AccountCode == "" {
			return false
		}
		currency := e.LineCurrency(l)
		if currency != e.Currency && e.Currency != MultiCurrency {
			return false
		}
		t := byCurrency[currency]
		if t == nil {
			t = &totals{}
			byCurrency[currency] = t
		}
		switch l.Direction {
		case Debit:
			if t.debits > math.MaxInt64-l.Amount {
				return false
			}
			t.debits += l.Amount
			t.nDebits++
		case Credit:
			if t.credits > math.MaxInt64-l.Amount {
				return false
			}
			t.credits += l.Amount
			t.nCredits++
		default:
			return false
		}
	}
	for _, t := range byCurrency {
		if t.nDebits == 0 || t.nCredits == 0 || t.debits != t.credits {
			return false
		}
	}
	return len(byCurrency) > 0
}

// Debits is the total of the entry's debit lines: the amount it moves (on a MultiCurrency
// entry, a sum across currencies that only compares with the same entry's).
func (e Entry) Debits() int64 {
	var sum int64
	for _, l := range e.Lines {
		if l.Direction == Debit {
			sum += l.Amount
		}
	}
	return sum
}

// Errors of the ledger. They are application errors, so the HTTP API shows them as they are.
var (
	ErrAccountNotFound = problem.New(problem.NotFound, "account-not-found", "the account is not in the chart of accounts")
	ErrEntryNotFound   = problem.New(problem.NotFound, "entry-not-found", "no journal entry matches")
	ErrUnavailable     = problem.New(problem.Unavailable, "unavailable", "the ledger is unavailable; retry later")
	ErrInvalidAccount  = problem.New(problem.Invalid, "invalid-account", "the account is not valid")
	ErrAccountExists   = problem.New(problem.Conflict, "account-exists", "the chart of accounts already has this code")
	ErrInvalidCursor   = problem.New(problem.Invalid, "invalid-cursor", "the cursor is not one this API returned")
)

// ErrUnbalanced is returned for an entry that must not be posted (see Entry.Balanced). It is a
// bug in whoever built the entry, so it is not an application error.
var ErrUnbalanced = errors.New("journal entry does not balance")

// Posting is where a movement's posting is, as the ledger returns it for an entry given to
// post: the stored entry (without lines), the total of its debits, and whether this call
// created it. The ledger never stores a second entry for the same event or movement. The total
// is a Sum: an entry written around the ledger (plain SQL) may balance with debits beyond
// int64, and must still compare as different.
type Posting struct {
	Entry   Entry
	Amount  Sum
	Created bool
}

// ErrEventTaken says an event id was already posted for another transfer.
var ErrEventTaken = errors.New("event already posted for another transfer")

// Account is an account of the chart of accounts.
type Account struct {
	Code          string
	Name          string
	Type          AccountType
	NormalBalance Direction // the side on which the account grows
	// WalletControl marks a control account of wallets (2010, 2020): each of its lines names
	// the wallet whose sub-account it belongs to (subledger.go).
	WalletControl bool
}

// AccountType is one of the five classes of the chart of accounts.
type AccountType string

// The account types.
const (
	Asset     AccountType = "asset"
	Liability AccountType = "liability"
	Equity    AccountType = "equity"
	Revenue   AccountType = "revenue"
	Expense   AccountType = "expense"
)

// AccountTypes lists the types in the order of a balance sheet and income statement.
var AccountTypes = []AccountType{Asset, Liability, Equity, Revenue, Expense}

// NormalBalance is the side on which an account of type t grows: debit for assets and
// expenses, credit for the others. It is "" for an unknown type.
func (t AccountType) NormalBalance() Direction {
	switch t {
	case Asset, Expense:
		return Debit
	case Liability, Equity, Revenue:
		return Credit
	}
	return ""
}

var accountCode = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// NewAccount returns an account of the given type, its normal balance derived from the type.
func NewAccount(code, name string, typ AccountType) (Account, error) {
	switch {
	case !accountCode.MatchString(code):
		return Account{}, problem.Newf(ErrInvalidAccount, "account code %q must be 1 to 32 letters, digits, '.', '_' or '-'", code)
	case strings.TrimSpace(name) == "":
		return Account{}, problem.Newf(ErrInvalidAccount, "account %s needs a name", code)
	case !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		return Account{}, problem.Newf(ErrInvalidAccount, "account %s's name must be UTF-8 text without control characters", code)
	case typ.NormalBalance() == "":
		return Account{}, problem.Newf(ErrInvalidAccount, "account type %q is not one of asset, liability, equity, revenue, expense", typ)
	}
	return Account{Code: code, Name: name, Type: typ, NormalBalance: typ.NormalBalance()}, nil
}

// Accounts looks accounts up in the chart of accounts (ErrAccountNotFound when missing).
type Accounts interface {
	Account(ctx context.Context, code string) (Account, error)
}

// AccountBalance is the sum of an account's lines in one currency, up to AsOf when set.
type AccountBalance struct {
	AccountCode   string
	Currency      string
	WalletID      string     // the wallet whose sub-account this is; "": the whole account
	NormalBalance Direction  // the account's: the side Balance is positive on
	AsOf          *time.Time // nil: every line posted so far
	Debits        Sum
	Credits       Sum
}

// Balance is the account's balance in its normal-balance sign: debits minus credits for a
// debit-normal account, credits minus debits otherwise (negative when the account is overdrawn
// against its nature).
func (b AccountBalance) Balance() Sum {
	if b.NormalBalance == Credit {
		return b.Credits.Sub(b.Debits)
	}
	return b.Debits.Sub(b.Credits)
}

// StatementLine is one line of an account statement.
type StatementLine struct {
	LineID         int64
	EntryID        uuid.UUID
	EventID        string
	TransferID     string
	Adjustment     bool // the line is an adjustment's (its entry's kind is KindAdjustment)
	Direction      Direction
	Amount         int64
	PostedAt       time.Time
	RunningBalance Sum // after this line, in the account's normal-balance sign
}

// StatementQuery asks for one page of an account's lines in one currency, posted in
// [From, To) (a nil bound is open); with WalletID, of that wallet's sub-account only.
type StatementQuery struct {
	AccountCode string
	Currency    string
	WalletID    string // "": every line of the account
	From, To    *time.Time
	After       string // the cursor: "" for the first page, else a page's NextCursor
	Limit       int
}

// Statement is one page of an account's lines, oldest first.
type Statement struct {
	Account    Account
	Currency   string
	Lines      []StatementLine
	NextCursor string // "" when this page is the last
}

// EntryQuery asks for one page of entries posted in [From, To); a nil bound is open (any time,
// the zero time included, is a bound).
type EntryQuery struct {
	From, To *time.Time
	After    string // the cursor: "" for the first page, else a page's NextCursor
	Limit    int
	// Metadata: only the entries whose metadata holds every pair of it (empty: any entry).
	Metadata metadata.Metadata
}

// EntryPage is one page of entries with their lines, in posting order.
type EntryPage struct {
	Entries    []Entry
	NextCursor string // "" when this page is the last
}

// Page sizes of the paginated reads.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// CurrencyTotal sums all lines of one currency; the ledger balances when every total does.
type CurrencyTotal struct {
	Currency string
	Debits   Sum
	Credits  Sum
	Balanced bool
}

// TrialBalance lists every account's balance per currency with the totals per currency.
type TrialBalance struct {
	AsOf       *time.Time // nil: every line posted so far
	Accounts   []AccountBalance
	Currencies []CurrencyTotal
	Balanced   bool
}

// NewTrialBalance totals the accounts' balances per currency. An empty ledger balances.
func NewTrialBalance(accounts []AccountBalance) TrialBalance {
	totals := map[string]*CurrencyTotal{}
	for _, a := range accounts {
		t, ok := totals[a.Currency]
		if !ok {
			t = &CurrencyTotal{Currency: a.Currency}
			totals[a.Currency] = t
		}
		t.Debits = t.Debits.Add(a.Debits)
		t.Credits = t.Credits.Add(a.Credits)
	}
	tb := TrialBalance{Accounts: accounts, Currencies: make([]CurrencyTotal, 0, len(totals)), Balanced: true}
	if tb.Accounts == nil {
		tb.Accounts = []AccountBalance{}
	}
	for _, t := range totals {
		t.Balanced = t.Debits.Equal(t.Credits)
		tb.Balanced = tb.Balanced && t.Balanced
		tb.Currencies = append(tb.Currencies, *t)
	}
	sort.Slice(tb.Currencies, func(i, j int) bool { return tb.Currencies[i].Currency < tb.Currencies[j].Currency })
	return tb
}

// Reader is what the HTTP API reads from the ledger.
type Reader interface {
	// EntriesByTransfer returns the transfer's entries with their lines; none is not an error.
	EntriesByTransfer(ctx context.Context, transferID string) ([]Entry, error)
	// EntriesByEvent returns the entries the event caused (at most one); none is not an error.
	EntriesByEvent(ctx context.Context, eventID string) ([]Entry, error)
	// Entries returns a page of entries by posting time. A cursor that names no entry is
	// ErrInvalidCursor.
	Entries(ctx context.Context, q EntryQuery) (EntryPage, error)
	// AccountBalance sums the lines posted up to asOf (nil: all of them; a time before the
	// first posting: none, a balance of 0 as of that time). It returns ErrAccountNotFound for a
	// code outside the chart of accounts.
	AccountBalance(ctx context.Context, code, currency string, asOf *time.Time) (AccountBalance, error)
	// WalletBalance is AccountBalance of one wallet's sub-account: the lines of the account
	// that name the wallet.
	WalletBalance(ctx context.Context, code, currency, walletID string, asOf *time.Time) (AccountBalance, error)
	// Statement returns a page of an account's lines with running balances. A cursor that
	// names no line of the account and currency is ErrInvalidCursor.
	Statement(ctx context.Context, q StatementQuery) (Statement, error)
	// TrialBalance is TrialBalanceAsOf every line posted so far.
	TrialBalance(ctx context.Context) (TrialBalance, error)
	// TrialBalanceAsOf sums every account's lines posted at or before asOf (nil: all of them).
	TrialBalanceAsOf(ctx context.Context, asOf *time.Time) (TrialBalance, error)
}
