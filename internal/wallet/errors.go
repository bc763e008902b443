package wallet

import (
	"walletgl/internal/money"
	"walletgl/internal/problem"
)

// The application errors of the wallet service. Their slugs are the stable part of the
// problem type clients match on; problem.Newf gives one a specific detail and errors.Is still
// matches it against the sentinel.
var (
	ErrInvalid = problem.New(problem.Invalid, "invalid-request", "the request is invalid")
	// ErrInvalidCurrency: a currency code that is not ISO 4217 (the GL refuses it alike).
	ErrInvalidCurrency   = money.ErrInvalidCurrency
	ErrInvalidCursor     = problem.New(problem.Invalid, "invalid-cursor", "the cursor is not one this API returned")
	ErrWalletExists      = problem.New(problem.Conflict, "wallet-exists", "a wallet with this id exists")
	ErrWalletNotFound    = problem.New(problem.NotFound, "wallet-not-found", "the wallet does not exist")
	ErrTransferNotFound  = problem.New(problem.NotFound, "transfer-not-found", "the transfer does not exist")
	ErrInsufficientFunds = problem.New(problem.Unprocessable, "insufficient-funds",
		"the source wallet's balance does not cover the amount")
	ErrBalanceBelowMinimum = problem.New(problem.Unprocessable, "balance-below-minimum",
		"the movement would take the wallet's available balance below its minimum (min_balance)")
	ErrBalanceAboveMaximum = problem.New(problem.Unprocessable, "balance-above-maximum",
		"the movement would take the wallet's balance above its maximum (max_balance)")
	ErrCurrencyMismatch = problem.New(problem.Unprocessable, "currency-mismatch",
		"the transfer's currency differs from a wallet's currency")
	ErrSameWallet        = problem.New(problem.Unprocessable, "same-wallet", "a wallet cannot transfer to itself")
	ErrBalanceOutOfRange = problem.New(problem.Unprocessable, "balance-out-of-range",
		"the transfer would take a balance beyond what a wallet can hold")
	ErrReversalExceedsTransfer = problem.New(problem.Unprocessable, "reversal-exceeds-transfer",
		"the transfer's reversals would total more than its amount")
	ErrNothingToReverse = problem.New(problem.Unprocessable, "transfer-fully-reversed",
		"the transfer's reversals total its amount already; nothing is left to reverse")
	ErrReversalOfReversal = problem.New(problem.Unprocessable, "transfer-is-reversal",
		"a reversal cannot be reversed; make a new transfer instead")
	ErrIdempotencyKeyReused = problem.New(problem.Unprocessable, "idempotency-key-reused",
		"this Idempotency-Key was used for a different transfer")
	ErrIdempotencyKeyInFlight = problem.New(problem.Conflict, "idempotency-key-in-flight",
		"a request with this Idempotency-Key is still being processed; retry later")
	ErrHoldNotFound   = problem.New(problem.NotFound, "hold-not-found", "the hold does not exist")
	ErrHoldNotPending = problem.New(problem.Conflict, "hold-not-pending",
		"the hold was captured or voided already")
	ErrHoldExpired = problem.New(problem.Conflict, "hold-expired",
		"the hold expired; its amount is released and it cannot be captured")
	ErrCaptureExceedsHold = problem.New(problem.Unprocessable, "capture-exceeds-hold",
		"the capture's amount is more than the hold's")
	ErrUnavailable = problem.New(problem.Unavailable, "database-unavailable",
		"the database is unavailable; retry later")
)
