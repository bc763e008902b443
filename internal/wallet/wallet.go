// Package wallet owns the wallet domain: wallets holding a balance in one currency, transfers
// between them that are idempotent per client key, the rules a request must pass and the
// application errors a client can see. Adapters live beside it: postgres (storage, outbox)
// and httpapi (the HTTP interface).
package wallet

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
	"walletgl/internal/metadata"
	"walletgl/internal/money"
	"walletgl/internal/problem"
)

// Transfer statuses. A transfer is written only when it succeeds, so it has one status; a
// reversal is a completed movement of its own (Transfer.ReversesTransferID), and a transfer's
// reversals show in ReversedAmount and Reversals, not in its status.
const StatusCompleted = "completed"

// Wallet holds money in one currency, as int64 minor units.
type Wallet struct {
	ID       string
	Currency string
	Balance  int64
	// Held is the total of the wallet's pending holds; Available (Balance − Held) is what it
	// may spend or hold more of, unless it may go negative.
	Held int64
	// AllowNegative marks a funding source: its balance may go below zero, which is how money
	// enters the system (every transfer keeps the per-currency sum unchanged).
	AllowNegative bool
	// Limits bound the balance; a wallet that may go negative has no minimum.
	Limits
	// ForcedDebit is how far below its minimum forced reversals have taken the wallet, in
	// total: the floor the database keeps it to is MinBalance − ForcedDebit.
	ForcedDebit int64
	// Owner is the owner of the key that created the wallet; "" for the platform's.
	Owner string
	// Metadata are the client's key-value pairs (empty when none were given); they stay in
	// the wallet: no event carries them.
	Metadata  metadata.Metadata
	CreatedAt time.Time
}

// Available is what w may spend: its balance less its pending holds.
func (w Wallet) Available() int64 { return w.Balance - w.Held }

// BelowMinimum is how far w's available balance is below its minimum: 0 unless a forced
// reversal took it there (or, for a funding wallet, ever).
func (w Wallet) BelowMinimum() int64 {
	if w.AllowNegative || w.Available() >= w.MinBalance {
		return 0
	}
	return w.MinBalance - w.Available()
}

// Limits bound a wallet's balance. MinBalance (≤ 0) is the lowest its available balance
// (balance − held) may go: 0 by default, below 0 for a credit line; a wallet that may go
// negative (AllowNegative) has none and keeps 0 here. MaxBalance, when set (≥ 0), is the
// highest its balance may go.
type Limits struct {
	MinBalance int64
	MaxBalance *int64
}

// MinLimit is the lowest minimum a wallet may have: far enough from the edge of a 64-bit
// balance that no check on it overflows.
const MinLimit = -1_000_000_000_000_000_000

// validate reports why l cannot be the limits of a wallet with allowNegative.
func (l Limits) validate(allowNegative bool) error {
	switch {
	case l.MinBalance > 0 || l.MinBalance < MinLimit:
		return problem.Newf(ErrInvalid, "min_balance must be from %d to 0, got %d", int64(MinLimit), l.MinBalance)
	case allowNegative && l.MinBalance != 0:
		return problem.Newf(ErrInvalid, "a wallet with allow_negative has no minimum: min_balance must be null")
	case l.MaxBalance != nil && *l.MaxBalance < 0:
		return problem.Newf(ErrInvalid, "max_balance must be 0 or more, got %d", *l.MaxBalance)
	}
	return nil
}

// LimitsChange is a change of a wallet's limits: each Set field replaces its limit (a
// MinBalance of 0 is the default minimum, a nil MaxBalance no maximum); the others stay.
type LimitsChange struct {
	SetMin, SetMax bool
	Limits
}

// WalletChange is a change of a wallet (PATCH /v1/wallets/{id}): its limits, as LimitsChange
// says, and, when SetMetadata, its metadata replaced by Metadata as a whole (empty: none).
type WalletChange struct {
	LimitsChange
	SetMetadata bool
	Metadata    metadata.Metadata
}

// ChangesLimits reports whether ch sets a limit.
func (ch WalletChange) ChangesLimits() bool { return ch.SetMin || ch.SetMax }

// ApplyLimits is w, locked, with the limits ch asks for: refused when they are invalid for it
// (400) or when its balance already lies outside them (422: a limit never puts a wallet in
// breach; a forced reversal alone takes one below its minimum).
func ApplyLimits(w Wallet, ch LimitsChange) (Wallet, error) {
	if ch.SetMin {
		if w.AllowNegative && ch.MinBalance != 0 {
			return w, problem.Newf(ErrInvalid, "wallet %q has allow_negative, so no minimum: min_balance must be null", w.ID)
		}
		w.MinBalance = ch.MinBalance
	}
	if ch.SetMax {
		w.MaxBalance = ch.MaxBalance
	}
	if err := w.Limits.validate(w.AllowNegative); err != nil {
		return w, err
	}
	switch {
	case ch.SetMin && !w.AllowNegative && w.Available() < w.MinBalance:
		return w, problem.Newf(ErrBalanceBelowMinimum, "wallet %q has %d %s available, below the minimum %d asked for", w.ID, w.Available(), w.Currency, w.MinBalance)
	case ch.SetMax && w.MaxBalance != nil && w.Balance > *w.MaxBalance:
		return w, problem.Newf(ErrBalanceAboveMaximum, "wallet %q holds %d %s, above the maximum %d asked for", w.ID, w.Balance, w.Currency, *w.MaxBalance)
	}
	return w, nil
}

// Validate reports whether w can be created. Balance and CreatedAt are set by the store.
func (w Wallet) Validate() error {
	if err := validateWalletID("id", w.ID); err != nil {
		return err
	}
	if err := validateCurrency(w.Currency); err != nil {
		return err
	}
	if err := w.Metadata.Validate(); err != nil {
		return err
	}
	return w.Limits.validate(w.AllowNegative)
}

// Transfer moves Amount from one wallet to another; it is stored with its TransferCompleted
// event in one transaction.
type Transfer struct {
	ID             uuid.UUID
	IdempotencyKey string
	FromWalletID   string
	ToWalletID     string
	Amount         int64
	Currency       string
	Reference      string // the payer's, "" when none was given
	// Metadata are the client's key-value pairs (empty when none were given): a transfer's
	// and a reversal's as their requests gave them, a capture's transfer its hold's.
	Metadata metadata.Metadata
	Status   string
	// OutboxStatus is where the transfer's event is on its way to the general ledger: pending,
	// dispatching, dispatched, failed, dead_letter, or acknowledged once the GL posted it.
	OutboxStatus string
	EventID      uuid.UUID
	CreatedAt    time.Time
	// ReversesTransferID is, for a reversal, the transfer it reverses (uuid.Nil otherwise). A
	// reversal moves money the other way: its FromWalletID is the original's ToWalletID.
	ReversesTransferID uuid.UUID
	// ReversedAmount is the total of the transfer's reversals so far, at most Amount.
	ReversedAmount int64
	// HoldID is, for a capture's transfer, the hold it completes (uuid.Nil otherwise).
	HoldID uuid.UUID
	// Forced marks a reversal that took its from-wallet below its minimum (ReversalRequest.Force).
	Forced bool
	// Reversals are the transfer's reversals, oldest first, where a transfer is read alone
	// (GetTransfer); nil elsewhere.
	Reversals []Transfer
	// BatchID is, for a leg of a batch, its batch (uuid.Nil otherwise), and BatchLeg its
	// 0-based place in the batch.
	BatchID  uuid.UUID
	BatchLeg int
	// BatchReversalID is, for a reversal a batch reversal made, that batch reversal.
	BatchReversalID uuid.UUID
}

// IsReversal reports whether t reverses another transfer.
func (t Transfer) IsReversal() bool { return t.ReversesTransferID != uuid.Nil }

// Cursor is the position after t in the list of transfers.
func (t Transfer) Cursor() Cursor { return Cursor{CreatedAt: t.CreatedAt, ID: t.ID} }

// TransferRequest is what a client asks for. The IdempotencyKey makes a retry safe: the same
// key with the same request returns the first transfer instead of moving money twice.
type TransferRequest struct {
	IdempotencyKey string
	FromWalletID   string
	ToWalletID     string
	Amount         int64
	Currency       string
	// Reference is the payer's free text, optional ("" when not given), at most
	// MaxReferenceLength characters; part of the request, so a replay must repeat it.
	Reference string
	// Metadata are the client's key-value pairs, optional (metadata.Validate); part of the
	// request, so a replay must repeat them.
	Metadata metadata.Metadata
	// KeyID is the API key that asks (recorded with the transfer; uuid.Nil: none). It is not
	// part of the request: a replay by another key is still the same transfer.
	KeyID uuid.UUID
}

// MaxAmount is the largest amount of one transfer, in minor units (10^15: ten trillion of a
// currency with cents). It keeps a single request far from the edge of a 64-bit balance.
const MaxAmount = 1_000_000_000_000_000

// Validate reports why r can never succeed, whatever the state of the wallets.
func (r TransferRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if err := validateWalletID("from_wallet_id", r.FromWalletID); err != nil {
		return err
	}
	if err := validateWalletID("to_wallet_id", r.ToWalletID); err != nil {
		return err
	}
	if r.Amount <= 0 || r.Amount > MaxAmount {
		return problem.Newf(ErrInvalid, "amount must be a whole number of minor units from 1 to %d, got %d", int64(MaxAmount), r.Amount)
	}
	if err := validateCurrency(r.Currency); err != nil {
		return err
	}
	if n := utf8.RuneCountInString(r.Reference); n > contract.MaxReferenceLength || !utf8.ValidString(r.Reference) {
		return problem.Newf(ErrInvalid, "reference must be valid UTF-8 of at most %d characters, got %d", contract.MaxReferenceLength, n)
	}
	if err := r.Metadata.Validate(); err != nil {
		return err
	}
	if r.FromWalletID == r.ToWalletID {
		return problem.Newf(ErrSameWallet, "wallet %q cannot transfer to itself", r.FromWalletID)
	}
	return nil
}

// ReversalRequest asks to move Amount of a completed transfer back, from the wallet that
// received it to the wallet that sent it, or, with Rest, whatever its reversals have not moved
// back yet. The IdempotencyKey works as a transfer's does (one key space with transfers).
type ReversalRequest struct {
	IdempotencyKey string
	TransferID     uuid.UUID // the transfer to reverse
	Amount         int64     // in minor units; the reversals of a transfer total at most its amount
	Rest           bool      // reverse the rest (Amount left 0): the amount not reversed yet, read under the transfer's lock
	// Force (a chargeback) lets the reversal take the receiver's wallet below its minimum, by
	// at most the reversal's amount (CheckForcedReversal); the HTTP API gives it to keys with
	// transfers:admin alone, and the store audits each reversal it forced.
	Force bool
	// Metadata are the client's key-value pairs of the reversal, optional; part of the
	// request, as a transfer's.
	Metadata metadata.Metadata
	KeyID    uuid.UUID // the API key that asks (uuid.Nil: none), as in TransferRequest
}

// Validate reports why r can never succeed, whatever the state of the transfer and wallets.
func (r ReversalRequest) Validate() error {
	if err := validateIdempotencyKey(r.IdempotencyKey); err != nil {
		return err
	}
	if err := r.Metadata.Validate(); err != nil {
		return err
	}
	if r.Rest {
		if r.Amount != 0 {
			return problem.Newf(ErrInvalid, "a reversal of the rest names no amount, got %d", r.Amount)
		}
		return nil
	}
	if r.Amount <= 0 || r.Amount > MaxAmount {
		return problem.Newf(ErrInvalid, "amount must be a whole number of minor units from 1 to %d, got %d", int64(MaxAmount), r.Amount)
	}
	return nil
}

// Service is what the HTTP interface needs; postgres.Store implements it.
type Service interface {
	CreateWallet(ctx context.Context, w Wallet) (Wallet, error)
	GetWallet(ctx context.Context, id string) (Wallet, error)
	// ListWallets returns a page of the wallets q asks for that the actor may see, newest
	// first. A cursor that names no wallet the actor may see is ErrInvalidCursor.
	ListWallets(ctx context.Context, q WalletQuery) (WalletPage, error)
	// UpdateWallet changes a wallet's limits (ApplyLimits) and metadata, each change audited
	// in the same transaction.
	UpdateWallet(ctx context.Context, id string, ch WalletChange) (Wallet, error)
	// CreateTransfer moves the money, or returns the transfer an earlier request with the same
	// key created (replayed is then true).
	CreateTransfer(ctx context.Context, req TransferRequest) (t Transfer, replayed bool, err error)
	// GetTransfer returns the transfer (or reversal) with this id, with its reversals.
	GetTransfer(ctx context.Context, id uuid.UUID) (Transfer, error)
	// ReverseTransfer moves the money of a reversal back and records it with its
	// TransferReversed event, or returns the reversal an earlier request with the same key
	// created (replayed is then true).
	ReverseTransfer(ctx context.Context, req ReversalRequest) (r Transfer, replayed bool, err error)
	// ListReversals returns the reversals of a transfer, oldest first.
	ListReversals(ctx context.Context, transferID uuid.UUID) ([]Transfer, error)
	// ListTransfers returns a page of the transfers q asks for, oldest first. A cursor that
	// names no transfer the actor may see is ErrInvalidCursor.
	ListTransfers(ctx context.Context, q TransferQuery) (Page, error)
	HoldService
	BatchService
}

// TransferQuery asks for one page of the transfer list: up to Limit transfers after the
// cursor, those from or to WalletID, those whose Reference it is and those whose metadata
// holds every pair of Metadata, when set.
type TransferQuery struct {
	After     Cursor
	Limit     int
	WalletID  string            // "": any wallet
	Reference string            // "": any reference
	Metadata  metadata.Metadata // empty: any metadata
	BatchID   uuid.UUID         // uuid.Nil: any transfer; else the legs of this batch
}

// Validate reports why q can never be answered.
func (q TransferQuery) Validate() error {
	if q.WalletID != "" {
		if err := validateWalletID("wallet_id", q.WalletID); err != nil {
			return err
		}
	}
	if n := utf8.RuneCountInString(q.Reference); n > contract.MaxReferenceLength || !utf8.ValidString(q.Reference) {
		return problem.Newf(ErrInvalid, "reference must be valid UTF-8 of at most %d characters, got %d", contract.MaxReferenceLength, n)
	}
	return q.Metadata.Validate()
}

// RecentQuery asks for one page of the transfers newest first, as the console lists them: up
// to Limit transfers before the cursor, those whose event is at EventStatus when set (an outbox
// status of contract.OutboxStatuses, or EventUnacknowledged for every one but acknowledged; a
// transfer whose outbox row retention deleted is acknowledged).
type RecentQuery struct {
	Before      Cursor
	Limit       int
	EventStatus string // "": any
}

// EventUnacknowledged is RecentQuery.EventStatus for the transfers whose event is not
// acknowledged yet, whatever its outbox status.
const EventUnacknowledged = "unacknowledged"

// Validate reports why q can never be answered.
func (q RecentQuery) Validate() error {
	if q.EventStatus == "" || q.EventStatus == EventUnacknowledged || slices.Contains(contract.OutboxStatuses, q.EventStatus) {
		return nil
	}
	return problem.Newf(ErrInvalid, "event status %q is not one of %s, %s", q.EventStatus, strings.Join(contract.OutboxStatuses, ", "), EventUnacknowledged)
}

// WalletQuery asks for one page of the wallet list, newest first: up to Limit wallets before
// the cursor, those whose metadata holds every pair of Metadata when set.
type WalletQuery struct {
	Before   WalletCursor
	Limit    int
	Metadata metadata.Metadata // empty: any metadata
}

// WalletPage is one slice of the wallet list.
type WalletPage struct {
	Wallets []Wallet
	// Next is where the following page starts, before the last wallet of this page; the zero
	// WalletCursor when this page is the last.
	Next WalletCursor
}

// WalletCursor is a position in the wallet list, ordered newest first by (CreatedAt, ID). The
// zero WalletCursor is the start of the list.
type WalletCursor struct {
	CreatedAt time.Time
	ID        string
}

// Cursor is where a listing after w (older than w) starts.
func (w Wallet) Cursor() WalletCursor { return WalletCursor{CreatedAt: w.CreatedAt, ID: w.ID} }

// IsZero reports whether c is the start of the list.
func (c WalletCursor) IsZero() bool { return c.CreatedAt.IsZero() && c.ID == "" }

// String encodes c for clients, who must treat it as opaque; the zero WalletCursor is "".
func (c WalletCursor) String() string {
	if c.IsZero() {
		return ""
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(c.ID)), uint64(c.CreatedAt.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, c.ID...))
}

// ParseWalletCursor decodes a cursor made by WalletCursor.String; "" is the start of the list.
func ParseWalletCursor(s string) (WalletCursor, error) {
	if s == "" {
		return WalletCursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 8 || !walletIDPattern.Match(b[8:]) {
		return WalletCursor{}, problem.Newf(ErrInvalidCursor, "cursor %q is not one this service handed out", s)
	}
	return WalletCursor{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), ID: string(b[8:])}, nil
}

// Page is one slice of the transfer list.
type Page struct {
	Transfers []Transfer
	// Next is where the following page starts, after the last transfer of this page; the zero
	// Cursor when this page is the last.
	Next Cursor
}

// Listing limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// Cursor is a position in the transfer list, ordered by (CreatedAt, ID). The zero Cursor is the
// start of the list.
type Cursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// IsZero reports whether c is the start of the list.
func (c Cursor) IsZero() bool { return c.CreatedAt.IsZero() && c.ID == uuid.Nil }

// String encodes c for clients, who must treat it as opaque; the zero Cursor is "".
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	// PostgreSQL keeps microseconds, so the cursor loses nothing.
	var b [8 + 16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.CreatedAt.UnixMicro()))
	copy(b[8:], c.ID[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ParseCursor decodes a cursor made by Cursor.String; "" is the start of the list.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8+16 {
		return Cursor{}, problem.Newf(ErrInvalidCursor, "cursor %q is not one this service handed out", s)
	}
	var c Cursor
	c.CreatedAt = time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC()
	copy(c.ID[:], b[8:])
	return c, nil
}

// CurrencyTotal is the sum of all balances in one currency. Transfers never change it, so a
// verifier compares it with the funding wallets' history.
type CurrencyTotal struct {
	Currency string
	Total    int64
	Wallets  int64
}

var walletIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func validateWalletID(field, id string) error {
	if !walletIDPattern.MatchString(id) {
		return problem.Newf(ErrInvalid, "%s must be 1 to 64 characters of A-Z, a-z, 0-9, _ or -", field)
	}
	return nil
}

// validateCurrency refuses a code that is not an ISO 4217 currency (money.ErrInvalidCurrency).
func validateCurrency(c string) error {
	_, err := money.Parse(c)
	return err
}

func validateIdempotencyKey(k string) error {
	if k == "" || len(k) > 255 {
		return problem.Newf(ErrInvalid, "the Idempotency-Key header is required: 1 to 255 printable ASCII characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return problem.Newf(ErrInvalid, "the Idempotency-Key header may hold only printable ASCII characters (byte %d is 0x%02x)", i, k[i])
		}
	}
	return nil
}

// ParseTransferID parses a transfer id from a client; an id that is not a UUID names no transfer.
func ParseTransferID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 {
		return uuid.Nil, problem.Newf(ErrTransferNotFound, "transfer %q does not exist", s)
	}
	return id, nil
}
