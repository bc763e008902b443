package wallet

import (
	"bytes"
	"math"
	"time"

	"walletgl/internal/events/contract"
	"walletgl/internal/problem"
)

// The rules of money movements, as functions of the wallets and holds they move. A store loads
// what they read (under the locks that keep it true until commit), asks them, and writes what
// they accept; it decides nothing itself.

// CheckTransfer applies a transfer's rules to its wallets as locked for it; a nil wallet does
// not exist. Money enters only through a wallet that may go negative; any other wallet spends
// down to its minimum at most (checkDebit), and no wallet receives past its maximum.
func CheckTransfer(req TransferRequest, from, to *Wallet) error {
	_, err := checkMove(req, from, to, false)
	return err
}

// CheckForcedReversal applies the rules of a forced reversal's movement (a chargeback): those
// of CheckTransfer, except that the original's receiver (from) may go below its minimum, by at
// most the reversal's amount: it must stand at or above its minimum before. It returns how far
// below its minimum the movement takes from (0: the force was not needed).
func CheckForcedReversal(move TransferRequest, from, to *Wallet) (shortfall int64, err error) {
	return checkMove(move, from, to, true)
}

func checkMove(req TransferRequest, from, to *Wallet, force bool) (shortfall int64, err error) {
	switch {
	case from == nil:
		return 0, problem.Newf(ErrWalletNotFound, "from_wallet_id %q does not exist", req.FromWalletID)
	case to == nil:
		return 0, problem.Newf(ErrWalletNotFound, "to_wallet_id %q does not exist", req.ToWalletID)
	case from.Currency != req.Currency:
		return 0, problem.Newf(ErrCurrencyMismatch,
			"wallet %q holds %s, the transfer is in %s", from.ID, from.Currency, req.Currency)
	case to.Currency != req.Currency:
		return 0, problem.Newf(ErrCurrencyMismatch,
			"wallet %q holds %s, the transfer is in %s", to.ID, to.Currency, req.Currency)
	}
	if err := checkDebit(*from, "transfer", req.Amount); err != nil {
		if !force || from.Available() < from.MinBalance {
			return 0, err
		}
		shortfall = from.MinBalance + req.Amount - from.Available()
	}
	switch {
	case to.Balance > math.MaxInt64-req.Amount:
		return 0, problem.Newf(ErrBalanceOutOfRange, "wallet %q would hold more than %d", to.ID, int64(math.MaxInt64))
	case from.Balance < math.MinInt64+req.Amount:
		return 0, problem.Newf(ErrBalanceOutOfRange, "wallet %q would hold less than %d", from.ID, int64(math.MinInt64))
	case to.MaxBalance != nil && to.Balance > *to.MaxBalance-req.Amount: // max ≥ 0, amount > 0: no overflow
		return 0, problem.Newf(ErrBalanceAboveMaximum, "wallet %q cannot receive %d %s: its balance may not exceed %d",
			to.ID, req.Amount, to.Currency, *to.MaxBalance)
	}
	return shortfall, nil
}

// checkDebit refuses a movement of amount out of w that takes its available balance below its
// minimum; a wallet that may go negative has none. A wallet whose minimum is 0 answers
// insufficient-funds, as it always has; one with a credit line (a minimum below 0),
// balance-below-minimum. Neither names a balance (see insufficientFunds).
func checkDebit(w Wallet, movement string, amount int64) error {
	// MinBalance ≥ MinLimit and amount ≤ MaxAmount: no overflow.
	if w.AllowNegative || w.Available() >= w.MinBalance+amount {
		return nil
	}
	if w.MinBalance == 0 {
		return insufficientFunds(w.ID, movement, amount, w.Currency)
	}
	return problem.Newf(ErrBalanceBelowMinimum, "wallet %q cannot spend %d %s for the %s without going below its minimum",
		w.ID, amount, w.Currency, movement)
}

// insufficientFunds refuses a movement of amount from wallet id. It names no balance: the key
// that asks may not read the wallet (no wallets:read), and a refusal is replayed to any key of
// its owner; GET /v1/wallets/{id} shows the figures to a key that may read them.
func insufficientFunds(id, movement string, amount int64, currency string) error {
	return problem.Newf(ErrInsufficientFunds, "wallet %q does not have %d %s available for the %s", id, amount, currency, movement)
}

// Move applies an accepted transfer of amount to the running balances of from and to, so that
// the next transfer of the same batch is checked against them.
func Move(from, to *Wallet, amount int64) {
	from.Balance -= amount
	to.Balance += amount
}

// TransferKind is the kind of a transfer between from and to (contract.TransferKind of whether
// each may go negative); a nil wallet counts as one that may not.
func TransferKind(from, to *Wallet) string {
	return contract.TransferKind(from != nil && from.AllowNegative, to != nil && to.AllowNegative)
}

// Replay answers a request whose idempotency key owner already holds: the owner itself when
// the request is the same (its fingerprint hash equals the owner's, ownerHash), a refusal
// otherwise. A key names one request for good.
func Replay(key string, hash, ownerHash []byte, owner Transfer) (Transfer, error) {
	if !bytes.Equal(ownerHash, hash) {
		return Transfer{}, problem.Newf(ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for transfer %s, which differs from this request", key, owner.ID)
	}
	return owner, nil
}

// CheckHold applies the rules of a new hold of amount in currency to its locked wallet w: the
// wallet's currency, and the hold leaves its available balance at or above its minimum
// (checkDebit).
func CheckHold(amount int64, currency string, w Wallet) error {
	if w.Currency != currency {
		return problem.Newf(ErrCurrencyMismatch, "wallet %q holds %s, the hold is in %s", w.ID, w.Currency, currency)
	}
	return checkDebit(w, "hold", amount)
}

// CheckCapture applies a capture's rules to its locked hold h at now: the hold is pending and
// not expired, and amount is within it.
func CheckCapture(h Hold, amount int64, now time.Time) error {
	switch {
	case h.Status != HoldPending:
		return problem.Newf(ErrHoldNotPending, "hold %s is %s", h.ID, h.Status)
	case h.Expired(now):
		return problem.Newf(ErrHoldExpired, "hold %s expired at %s", h.ID, h.ExpiresAt.Format(time.RFC3339))
	case amount > h.Amount:
		return problem.Newf(ErrCaptureExceedsHold, "hold %s is of %d %s; %d cannot be captured", h.ID, h.Amount, h.Currency, amount)
	}
	return nil
}

// CaptureMove is the transfer a capture of amount from hold h to req.ToWalletID makes.
func CaptureMove(req CaptureRequest, h Hold, amount int64) TransferRequest {
	return TransferRequest{
		IdempotencyKey: req.IdempotencyKey, FromWalletID: h.WalletID, ToWalletID: req.ToWalletID,
		Amount: amount, Currency: h.Currency, KeyID: req.KeyID,
	}
}

// Released is w with the pending hold h released: what a capture of h spends from.
func Released(w *Wallet, h Hold) *Wallet {
	if w == nil {
		return nil
	}
	released := *w
	released.Held -= h.Amount
	return &released
}

// ResolveReversal is req with its amount: for a reversal of the rest, what orig's reversals
// have not moved back yet (orig read under its lock). Nothing left is ErrNothingToReverse.
func ResolveReversal(req ReversalRequest, orig Transfer) (ReversalRequest, error) {
	if !req.Rest {
		return req, nil
	}
	left := orig.Amount - orig.ReversedAmount
	if left <= 0 {
		return req, problem.Newf(ErrNothingToReverse, "transfer %s of %d %s is reversed in full; nothing is left to reverse",
			orig.ID, orig.Amount, orig.Currency)
	}
	req.Amount = left
	return req, nil
}

// ReversalMove is the transfer a reversal of orig makes: the money goes back, from the
// original's receiver to its sender, in the original's currency.
func ReversalMove(req ReversalRequest, orig Transfer) TransferRequest {
	return TransferRequest{
		IdempotencyKey: req.IdempotencyKey, FromWalletID: orig.ToWalletID, ToWalletID: orig.FromWalletID,
		Amount: req.Amount, Currency: orig.Currency, KeyID: req.KeyID,
	}
}

// CheckReversal applies a reversal's own rules to its locked original: a reversal is not
// reversed, and the reversals stay within the original's amount. The movement it makes must
// pass CheckTransfer too.
func CheckReversal(req ReversalRequest, orig Transfer) error {
	if orig.IsReversal() {
		return problem.Newf(ErrReversalOfReversal,
			"%s is a reversal of transfer %s; it cannot be reversed", orig.ID, orig.ReversesTransferID)
	}
	if left := orig.Amount - orig.ReversedAmount; req.Amount > left {
		return problem.Newf(ErrReversalExceedsTransfer,
			"transfer %s of %d %s has %d reversed; at most %d more can be, not %d",
			orig.ID, orig.Amount, orig.Currency, orig.ReversedAmount, left, req.Amount)
	}
	return nil
}
