package gl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"walletgl/internal/money"
	"walletgl/internal/problem"
)

// Manual adjustments: an accountant corrects the books with one balanced entry posted through
// the API (POST /v1/adjustments). Its entry is no event of the wallet: it carries the event type
// TypeAdjustment, the kind KindAdjustment and the movement key AdjustmentKey in both its
// transfer and event ids, which no transfer, reversal or hold can take (db/schema/gl/00015).
// No posting rule posts it, no inbox row records it and no wallet transfer matches it: gl verify
// and gl reconcile leave it out of those checks, and check instead that each adjustment entry
// has its adjustment row and the other way round.

// The event type and kind of an adjustment's entry.
const (
	TypeAdjustment = "Adjustment.v1"
	KindAdjustment = "adjustment"
)

// AdjustmentKey is the movement key of adjustment id: its entry's transfer and event id.
func AdjustmentKey(id uuid.UUID) string { return "adjustment:" + id.String() }

// IsAdjustmentKey reports whether transferID is an adjustment's movement key.
func IsAdjustmentKey(transferID string) bool {
	rest, ok := strings.CutPrefix(transferID, "adjustment:")
	if !ok {
		return false
	}
	id, err := uuid.Parse(rest)
	return err == nil && AdjustmentKey(id) == transferID
}

// IsAdjustment reports whether e is an adjustment's entry.
func (e Entry) IsAdjustment() bool { return e.Kind == KindAdjustment }

// Limits of an adjustment request.
const (
	MaxAdjustmentLines  = 100
	MaxAdjustmentReason = 500
)

// AdjustmentLine is one line of an adjustment as a client gives it: an amount on one side of
// an account (Debit or Credit, the other 0), and the wallet whose sub-account it belongs to,
// required on a control account of wallets and refused on any other account.
type AdjustmentLine struct {
	AccountCode string
	Debit       int64
	Credit      int64
	WalletID    string
}

// AdjustmentRequest asks for one adjustment. IdempotencyKey makes a retry safe: the same key
// with the same request answers with the first adjustment, with another request it is refused.
type AdjustmentRequest struct {
	IdempotencyKey string
	Reason         string
	Currency       string
	Lines          []AdjustmentLine
	// EffectiveAt is the entry's occurred_at, when the correction applies; nil: when it is
	// posted. Balances, statements and the trial balance go by the posting time, as for every
	// entry.
	EffectiveAt *time.Time
	KeyID       uuid.UUID // the API key that asks, recorded with the adjustment
}

// Adjustment is a posted adjustment with its entry (and the entry's lines).
type Adjustment struct {
	ID        uuid.UUID
	Reason    string
	KeyID     uuid.UUID
	CreatedAt time.Time
	Entry     Entry
}

// Errors of an adjustment. account-not-found is ErrAccountNotFound's type, answered 422 here:
// the request names an account, it does not address one.
var (
	ErrInvalidAdjustment = problem.New(problem.Invalid, "invalid-request", "the adjustment is not valid")
	ErrEntryUnbalanced   = problem.New(problem.Unprocessable, "entry-unbalanced",
		"the adjustment's debits and credits differ")
	ErrAdjustmentAccount = problem.New(problem.Unprocessable, "account-not-found",
		"an account of the adjustment is not in the chart of accounts")
	ErrWalletIDRequired = problem.New(problem.Unprocessable, "wallet-id-required",
		"a line on a control account of wallets must name its wallet")
	ErrWalletIDNotAllowed = problem.New(problem.Unprocessable, "wallet-id-not-allowed",
		"only a line on a control account of wallets names a wallet")
	ErrIdempotencyKeyReused = problem.New(problem.Unprocessable, "idempotency-key-reused",
		"this Idempotency-Key was used for a different adjustment")
)

// Adjuster posts adjustments (postgres.Ledger): the entry, its adjustment row and the audit
// record in one transaction. replayed is true when an earlier request with the same key and
// body made the adjustment returned.
type Adjuster interface {
	Adjust(ctx context.Context, req AdjustmentRequest) (a Adjustment, replayed bool, err error)
}

// walletIDPattern is the wallet service's wallet id syntax, the one journal_lines.wallet_id
// takes.
var walletIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidWalletID reports whether id has the syntax of a wallet id.
func ValidWalletID(id string) bool { return walletIDPattern.MatchString(id) }

// Validate checks what a request says on its own: its key, reason, currency, the lines'
// syntax and amounts, and that debits equal credits (ErrEntryUnbalanced). The accounts are
// checked against the chart by Entry.
func (r AdjustmentRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	reason := strings.TrimSpace(r.Reason)
	switch {
	case reason == "":
		return problem.Newf(ErrInvalidAdjustment, "reason is required: say why the books are corrected")
	case utf8.RuneCountInString(r.Reason) > MaxAdjustmentReason:
		return problem.Newf(ErrInvalidAdjustment, "reason is over %d characters", MaxAdjustmentReason)
	case !utf8.ValidString(r.Reason) || strings.ContainsFunc(r.Reason, unicode.IsControl):
		return problem.Newf(ErrInvalidAdjustment, "reason must be UTF-8 text without control characters")
	case !money.Valid(r.Currency):
		return problem.Newf(money.ErrInvalidCurrency, "currency %q is not an upper-case ISO 4217 currency code", r.Currency)
	case len(r.Lines) < 2 || len(r.Lines) > MaxAdjustmentLines:
		return problem.Newf(ErrInvalidAdjustment, "an adjustment has 2 to %d lines, got %d", MaxAdjustmentLines, len(r.Lines))
	}
	var debits, credits int64
	for i, l := range r.Lines {
		switch {
		case !accountCode.MatchString(l.AccountCode):
			return problem.Newf(ErrInvalidAdjustment, "lines[%d].account must be 1 to 32 letters, digits, '.', '_' or '-', got %q", i, l.AccountCode)
		case l.Debit < 0 || l.Credit < 0:
			return problem.Newf(ErrInvalidAdjustment, "lines[%d]: an amount is a positive number of minor units", i)
		case (l.Debit > 0) == (l.Credit > 0):
			return problem.Newf(ErrInvalidAdjustment, "lines[%d] needs exactly one of debit and credit, a positive number of minor units", i)
		case l.WalletID != "" && !ValidWalletID(l.WalletID):
			return problem.Newf(ErrInvalidAdjustment, "lines[%d].wallet_id must be 1 to 64 letters, digits, '_' or '-'", i)
		case debits > math.MaxInt64-l.Debit || credits > math.MaxInt64-l.Credit:
			return problem.Newf(ErrInvalidAdjustment, "the lines' amounts total more than %d", int64(math.MaxInt64))
		}
		debits += l.Debit
		credits += l.Credit
	}
	if debits != credits {
		return problem.Newf(ErrEntryUnbalanced, "debits total %d, credits %d: an entry balances", debits, credits)
	}
	return nil
}

// validateIdempotencyKey is the wallet's rule for the header: 1 to 255 printable ASCII
// characters.
func validateIdempotencyKey(k string) error {
	if k == "" || len(k) > 255 {
		return problem.Newf(ErrInvalidAdjustment, "the Idempotency-Key header is required: 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return problem.Newf(ErrInvalidAdjustment, "the Idempotency-Key header may hold only printable ASCII characters (byte %d is 0x%02x)", i, k[i])
		}
	}
	return nil
}

// Entry builds the adjustment's entry, id its adjustment's id and entryID the entry's, against
// chart, the chart of accounts by code: every account in it, and a wallet named on exactly the
// lines on a control account of wallets. now is the database's time, the entry's occurred_at
// unless the request gives one.
func (r AdjustmentRequest) Entry(id, entryID uuid.UUID, chart map[string]Account, now time.Time) (Entry, error) {
	if err := r.Validate(); err != nil {
		return Entry{}, err
	}
	lines := make([]Line, 0, len(r.Lines))
	for i, l := range r.Lines {
		account, ok := chart[l.AccountCode]
		switch {
		case !ok:
			return Entry{}, problem.Newf(ErrAdjustmentAccount, "lines[%d]: account %q is not in the chart of accounts", i, l.AccountCode)
		case account.WalletControl && l.WalletID == "":
			return Entry{}, problem.Newf(ErrWalletIDRequired, "lines[%d]: account %s is a control account of wallets; name the wallet (wallet_id)", i, l.AccountCode)
		case !account.WalletControl && l.WalletID != "":
			return Entry{}, problem.Newf(ErrWalletIDNotAllowed, "lines[%d]: account %s is no control account of wallets; leave wallet_id out", i, l.AccountCode)
		}
		line := Line{AccountCode: l.AccountCode, Direction: Debit, Amount: l.Debit, WalletID: l.WalletID}
		if l.Credit > 0 {
			line.Direction, line.Amount = Credit, l.Credit
		}
		lines = append(lines, line)
	}
	occurred := now
	if r.EffectiveAt != nil {
		occurred = *r.EffectiveAt
	}
	key := AdjustmentKey(id)
	return Entry{
		ID: entryID, EventID: key, TransferID: key, Currency: r.Currency,
		Description: "adjustment: " + strings.TrimSpace(r.Reason),
		OccurredAt:  occurred, Lines: lines, EventType: TypeAdjustment, Kind: KindAdjustment,
	}, nil
}

// Hash fingerprints what the request asks for, so that a key that comes back with another
// request is refused. Each field is length-prefixed: no two requests share an encoding.
func (r AdjustmentRequest) Hash() []byte {
	fields := []string{"adjustment.v1", r.Reason, r.Currency}
	if r.EffectiveAt != nil {
		fields = append(fields, "effective_at", r.EffectiveAt.UTC().Format(time.RFC3339Nano))
	}
	for _, l := range r.Lines {
		fields = append(fields, "line", l.AccountCode, strconv.FormatInt(l.Debit, 10), strconv.FormatInt(l.Credit, 10), l.WalletID)
	}
	h := sha256.New()
	for _, f := range fields {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return h.Sum(nil)
}

// ReplayAdjustment answers a request whose Idempotency-Key owner holds: owner itself when the
// request is the same (hash equals ownerHash), ErrIdempotencyKeyReused otherwise. A key names
// one adjustment for good.
func ReplayAdjustment(key string, hash, ownerHash []byte, owner Adjustment) (Adjustment, error) {
	if !bytes.Equal(hash, ownerHash) {
		return Adjustment{}, problem.Newf(ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for adjustment %s, which differs from this request", key, owner.ID)
	}
	return owner, nil
}
