package wallet_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
)

func TestCheckTransfer(t *testing.T) {
	t.Parallel()
	req := wallet.TransferRequest{IdempotencyKey: "k", FromWalletID: "a", ToWalletID: "b", Amount: 100, Currency: "USD"}
	usd := func(id string, balance, held int64) *wallet.Wallet {
		return &wallet.Wallet{ID: id, Currency: "USD", Balance: balance, Held: held}
	}
	source := usd("a", -500, 0)
	source.AllowNegative = true
	tests := []struct {
		name     string
		from, to *wallet.Wallet
		want     error
	}{
		{"a balance that covers the amount passes", usd("a", 100, 0), usd("b", 0, 0), nil},
		{"a missing sender is not found", nil, usd("b", 0, 0), wallet.ErrWalletNotFound},
		{"a missing receiver is not found", usd("a", 100, 0), nil, wallet.ErrWalletNotFound},
		{"a sender in another currency is refused", &wallet.Wallet{ID: "a", Currency: "EUR", Balance: 100}, usd("b", 0, 0), wallet.ErrCurrencyMismatch},
		{"a receiver in another currency is refused", usd("a", 100, 0), &wallet.Wallet{ID: "b", Currency: "EUR"}, wallet.ErrCurrencyMismatch},
		{"a balance short by one is refused", usd("a", 99, 0), usd("b", 0, 0), wallet.ErrInsufficientFunds},
		{"held money is not available", usd("a", 150, 51), usd("b", 0, 0), wallet.ErrInsufficientFunds},
		{"a funding source goes negative", source, usd("b", 0, 0), nil},
		{"a receiver past the int64 range is refused", usd("a", 100, 0), usd("b", math.MaxInt64-99, 0), wallet.ErrBalanceOutOfRange},
		{"a funding source past the int64 range is refused", &wallet.Wallet{ID: "a", Currency: "USD", Balance: math.MinInt64 + 99, AllowNegative: true}, usd("b", 0, 0), wallet.ErrBalanceOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := wallet.CheckTransfer(req, tt.from, tt.to)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestMoveKeepsTheSumAndFeedsTheNextCheck(t *testing.T) {
	t.Parallel()
	from := &wallet.Wallet{ID: "a", Currency: "USD", Balance: 150}
	to := &wallet.Wallet{ID: "b", Currency: "USD"}
	req := wallet.TransferRequest{FromWalletID: "a", ToWalletID: "b", Amount: 100, Currency: "USD"}
	require.NoError(t, wallet.CheckTransfer(req, from, to))
	wallet.Move(from, to, req.Amount)
	require.Equal(t, int64(50), from.Balance)
	require.Equal(t, int64(100), to.Balance)
	require.ErrorIs(t, wallet.CheckTransfer(req, from, to), wallet.ErrInsufficientFunds, "the second transfer of a batch sees the first")
}

func TestTransferKind(t *testing.T) {
	t.Parallel()
	source := &wallet.Wallet{ID: "s", AllowNegative: true}
	user := &wallet.Wallet{ID: "u"}
	require.Equal(t, contract.TransferKind(true, false), wallet.TransferKind(source, user))
	require.Equal(t, contract.TransferKind(false, true), wallet.TransferKind(user, source))
	require.Equal(t, contract.TransferKind(false, false), wallet.TransferKind(user, nil))
}

func TestReplay(t *testing.T) {
	t.Parallel()
	owner := wallet.Transfer{ID: uuid.New(), Amount: 5}
	got, err := wallet.Replay("k", []byte{1, 2}, []byte{1, 2}, owner)
	require.NoError(t, err)
	require.Equal(t, owner, got)
	_, err = wallet.Replay("k", []byte{1, 3}, []byte{1, 2}, owner)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused)
}

func TestCheckHold(t *testing.T) {
	t.Parallel()
	w := wallet.Wallet{ID: "a", Currency: "USD", Balance: 100, Held: 40}
	require.NoError(t, wallet.CheckHold(60, "USD", w))
	require.ErrorIs(t, wallet.CheckHold(61, "USD", w), wallet.ErrInsufficientFunds)
	require.ErrorIs(t, wallet.CheckHold(1, "EUR", w), wallet.ErrCurrencyMismatch)
	w.AllowNegative = true
	require.NoError(t, wallet.CheckHold(1000, "USD", w))
}

func TestCheckCapture(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pending := wallet.Hold{ID: uuid.New(), WalletID: "a", Amount: 50, Currency: "USD", Status: wallet.HoldPending, ExpiresAt: now.Add(time.Minute)}
	require.NoError(t, wallet.CheckCapture(pending, 50, now))
	require.ErrorIs(t, wallet.CheckCapture(pending, 51, now), wallet.ErrCaptureExceedsHold)
	require.ErrorIs(t, wallet.CheckCapture(pending, 50, now.Add(time.Minute)), wallet.ErrHoldExpired)
	voided := pending
	voided.Status = wallet.HoldVoided
	require.ErrorIs(t, wallet.CheckCapture(voided, 1, now), wallet.ErrHoldNotPending)
}

func TestACaptureSpendsTheHoldItReleases(t *testing.T) {
	t.Parallel()
	h := wallet.Hold{ID: uuid.New(), WalletID: "a", Amount: 80, Currency: "USD", Status: wallet.HoldPending}
	from := &wallet.Wallet{ID: "a", Currency: "USD", Balance: 100, Held: 80}
	to := &wallet.Wallet{ID: "b", Currency: "USD"}
	move := wallet.CaptureMove(wallet.CaptureRequest{IdempotencyKey: "c", HoldID: h.ID, ToWalletID: "b"}, h, 80)
	require.Equal(t, wallet.TransferRequest{IdempotencyKey: "c", FromWalletID: "a", ToWalletID: "b", Amount: 80, Currency: "USD"}, move)
	require.ErrorIs(t, wallet.CheckTransfer(move, from, to), wallet.ErrInsufficientFunds, "the held money is not available to others")
	require.NoError(t, wallet.CheckTransfer(move, wallet.Released(from, h), to))
	require.Equal(t, int64(80), from.Held, "Released leaves the locked wallet as it was")
	require.Nil(t, wallet.Released(nil, h))
}

func TestCheckReversal(t *testing.T) {
	t.Parallel()
	orig := wallet.Transfer{ID: uuid.New(), FromWalletID: "a", ToWalletID: "b", Amount: 100, Currency: "USD", ReversedAmount: 30}
	req := wallet.ReversalRequest{IdempotencyKey: "r", TransferID: orig.ID, Amount: 70}
	require.NoError(t, wallet.CheckReversal(req, orig))
	require.Equal(t, wallet.TransferRequest{IdempotencyKey: "r", FromWalletID: "b", ToWalletID: "a", Amount: 70, Currency: "USD"},
		wallet.ReversalMove(req, orig), "the money goes back")
	req.Amount = 71
	require.ErrorIs(t, wallet.CheckReversal(req, orig), wallet.ErrReversalExceedsTransfer)
	reversal := orig
	reversal.ReversesTransferID = uuid.New()
	req.Amount = 1
	require.ErrorIs(t, wallet.CheckReversal(req, reversal), wallet.ErrReversalOfReversal)
}

// limited is a USD wallet with balance, held and limits (max < 0: no maximum).
func limited(id string, balance, held, min, max int64) *wallet.Wallet {
	w := &wallet.Wallet{ID: id, Currency: "USD", Balance: balance, Held: held, Limits: wallet.Limits{MinBalance: min}}
	if max >= 0 {
		w.MaxBalance = &max
	}
	return w
}

// Each bound holds on both sides: a movement that ends exactly at it passes, one unit past it
// is refused, for the sender's minimum (with and without a credit line), the receiver's maximum,
// holds, and a reversal's wallets (the original's receiver and sender).
func TestEveryMovementRespectsBothBounds(t *testing.T) {
	t.Parallel()
	transfer := func(from, to *wallet.Wallet, amount int64) error {
		return wallet.CheckTransfer(wallet.TransferRequest{FromWalletID: from.ID, ToWalletID: to.ID, Amount: amount, Currency: "USD"}, from, to)
	}
	hold := func(w *wallet.Wallet, amount int64) error { return wallet.CheckHold(amount, "USD", *w) }
	capture := func(w *wallet.Wallet, h wallet.Hold, to *wallet.Wallet, amount int64) error {
		move := wallet.CaptureMove(wallet.CaptureRequest{ToWalletID: to.ID}, h, amount)
		return wallet.CheckTransfer(move, wallet.Released(w, h), to)
	}
	reversal := func(orig wallet.Transfer, receiver, sender *wallet.Wallet, amount int64) error {
		move := wallet.ReversalMove(wallet.ReversalRequest{Amount: amount}, orig)
		return wallet.CheckTransfer(move, receiver, sender)
	}
	orig := wallet.Transfer{ID: uuid.New(), FromWalletID: "s", ToWalletID: "r", Amount: 500, Currency: "USD"}
	h := wallet.Hold{ID: uuid.New(), WalletID: "a", Amount: 300, Currency: "USD", Status: wallet.HoldPending}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"a transfer down to a minimum of 0 passes", transfer(limited("a", 100, 0, 0, -1), limited("b", 0, 0, 0, -1), 100), nil},
		{"a transfer one past a minimum of 0 is insufficient-funds", transfer(limited("a", 100, 0, 0, -1), limited("b", 0, 0, 0, -1), 101), wallet.ErrInsufficientFunds},
		{"a transfer down to a credit line's minimum passes", transfer(limited("a", 100, 0, -50, -1), limited("b", 0, 0, 0, -1), 150), nil},
		{"a transfer one past a credit line's minimum is refused", transfer(limited("a", 100, 0, -50, -1), limited("b", 0, 0, 0, -1), 151), wallet.ErrBalanceBelowMinimum},
		{"held money counts against the minimum", transfer(limited("a", 100, 20, -50, -1), limited("b", 0, 0, 0, -1), 131), wallet.ErrBalanceBelowMinimum},
		{"a transfer up to the receiver's maximum passes", transfer(limited("a", 100, 0, 0, -1), limited("b", 900, 0, 0, 1000), 100), nil},
		{"a transfer one past the receiver's maximum is refused", transfer(limited("a", 101, 0, 0, -1), limited("b", 900, 0, 0, 1000), 101), wallet.ErrBalanceAboveMaximum},
		{"a deposit up to the maximum passes", transfer(&wallet.Wallet{ID: "m", Currency: "USD", AllowNegative: true}, limited("b", 0, 0, 0, 10), 10), nil},
		{"a deposit past the maximum is refused", transfer(&wallet.Wallet{ID: "m", Currency: "USD", AllowNegative: true}, limited("b", 0, 0, 0, 10), 11), wallet.ErrBalanceAboveMaximum},
		{"a withdrawal down to the credit line passes", transfer(limited("a", 0, 0, -10, -1), &wallet.Wallet{ID: "m", Currency: "USD", AllowNegative: true}, 10), nil},
		{"a withdrawal past the credit line is refused", transfer(limited("a", 0, 0, -10, -1), &wallet.Wallet{ID: "m", Currency: "USD", AllowNegative: true}, 11), wallet.ErrBalanceBelowMinimum},
		{"a hold down to a credit line's minimum passes", hold(limited("a", 100, 0, -50, -1), 150), nil},
		{"a hold one past a credit line's minimum is refused", hold(limited("a", 100, 0, -50, -1), 151), wallet.ErrBalanceBelowMinimum},
		{"a hold one past a minimum of 0 is insufficient-funds", hold(limited("a", 100, 0, 0, -1), 101), wallet.ErrInsufficientFunds},
		{"a capture up to the receiver's maximum passes", capture(limited("a", 300, 300, 0, -1), h, limited("b", 0, 0, 0, 300), 300), nil},
		{"a capture one past the receiver's maximum is refused", capture(limited("a", 300, 300, 0, -1), h, limited("b", 1, 0, 0, 300), 300), wallet.ErrBalanceAboveMaximum},
		{"a reversal down to the receiver's minimum passes", reversal(orig, limited("r", 100, 0, -400, -1), limited("s", 0, 0, 0, -1), 500), nil},
		{"a reversal one past the receiver's minimum is refused", reversal(orig, limited("r", 99, 0, -400, -1), limited("s", 0, 0, 0, -1), 500), wallet.ErrBalanceBelowMinimum},
		{"a reversal up to the sender's maximum passes", reversal(orig, limited("r", 500, 0, 0, -1), limited("s", 500, 0, 0, 1000), 500), nil},
		{"a reversal one past the sender's maximum is refused", reversal(orig, limited("r", 500, 0, 0, -1), limited("s", 501, 0, 0, 1000), 500), wallet.ErrBalanceAboveMaximum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.want == nil {
				require.NoError(t, tt.err)
				return
			}
			require.ErrorIs(t, tt.err, tt.want)
		})
	}
}

func TestCheckForcedReversal(t *testing.T) {
	t.Parallel()
	move := wallet.TransferRequest{FromWalletID: "r", ToWalletID: "s", Amount: 100, Currency: "USD"}
	tests := []struct {
		name          string
		receiver      *wallet.Wallet
		sender        *wallet.Wallet
		wantShortfall int64
		want          error
	}{
		{"a receiver that holds the money needs no force", limited("r", 100, 0, 0, -1), limited("s", 0, 0, 0, -1), 0, nil},
		{"a receiver that spent it all goes the amount below its minimum", limited("r", 0, 0, 0, -1), limited("s", 0, 0, 0, -1), 100, nil},
		{"a receiver that spent part goes the rest below", limited("r", 30, 0, 0, -1), limited("s", 0, 0, 0, -1), 70, nil},
		{"a credit line's receiver goes below its own minimum", limited("r", -50, 0, -50, -1), limited("s", 0, 0, 0, -1), 100, nil},
		{"held money is not the receiver's to give back", limited("r", 100, 100, 0, -1), limited("s", 0, 0, 0, -1), 100, nil},
		{"a receiver already below its minimum is refused", limited("r", -1, 0, 0, -1), limited("s", 0, 0, 0, -1), 0, wallet.ErrInsufficientFunds},
		{"a credit line's receiver below its minimum is refused", limited("r", -51, 0, -50, -1), limited("s", 0, 0, 0, -1), 0, wallet.ErrBalanceBelowMinimum},
		{"the sender's maximum still holds", limited("r", 0, 0, 0, -1), limited("s", 901, 0, 0, 1000), 0, wallet.ErrBalanceAboveMaximum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shortfall, err := wallet.CheckForcedReversal(move, tt.receiver, tt.sender)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantShortfall, shortfall)
			r := *tt.receiver
			wallet.Move(&r, tt.sender, move.Amount)
			require.GreaterOrEqual(t, r.Available(), r.MinBalance-move.Amount, "never lower than the minimum less the amount")
			require.Equal(t, shortfall, r.BelowMinimum())
		})
	}
}

func TestApplyLimits(t *testing.T) {
	t.Parallel()
	ten, zero := int64(10), int64(0)
	tests := []struct {
		name string
		w    wallet.Wallet
		ch   wallet.LimitsChange
		want error
	}{
		{"a credit line on an empty wallet is set", *limited("a", 0, 0, 0, -1), wallet.LimitsChange{SetMin: true, Limits: wallet.Limits{MinBalance: -100}}, nil},
		{"a minimum exactly at the available balance is set", *limited("a", 50, 10, 0, -1), wallet.LimitsChange{SetMin: true, Limits: wallet.Limits{MinBalance: 0}}, nil},
		{"a minimum above the available balance is refused", *limited("a", -1, 0, -10, -1), wallet.LimitsChange{SetMin: true, Limits: wallet.Limits{MinBalance: 0}}, wallet.ErrBalanceBelowMinimum},
		{"a maximum exactly at the balance is set", *limited("a", 10, 0, 0, -1), wallet.LimitsChange{SetMax: true, Limits: wallet.Limits{MaxBalance: &ten}}, nil},
		{"a maximum below the balance is refused", *limited("a", 11, 0, 0, -1), wallet.LimitsChange{SetMax: true, Limits: wallet.Limits{MaxBalance: &ten}}, wallet.ErrBalanceAboveMaximum},
		{"a positive minimum is invalid", *limited("a", 0, 0, 0, -1), wallet.LimitsChange{SetMin: true, Limits: wallet.Limits{MinBalance: 1}}, wallet.ErrInvalid},
		{"a minimum for a funding wallet is invalid", wallet.Wallet{ID: "m", Currency: "USD", AllowNegative: true}, wallet.LimitsChange{SetMin: true, Limits: wallet.Limits{MinBalance: -1}}, wallet.ErrInvalid},
		{"a negative maximum is invalid", *limited("a", 0, 0, 0, -1), wallet.LimitsChange{SetMax: true, Limits: wallet.Limits{MaxBalance: func() *int64 { n := int64(-1); return &n }()}}, wallet.ErrInvalid},
		{"a maximum of 0 on an empty wallet is set", *limited("a", 0, 0, 0, -1), wallet.LimitsChange{SetMax: true, Limits: wallet.Limits{MaxBalance: &zero}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := wallet.ApplyLimits(tt.w, tt.ch)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			if tt.ch.SetMin {
				require.Equal(t, tt.ch.MinBalance, got.MinBalance)
			}
			if tt.ch.SetMax {
				require.Equal(t, tt.ch.MaxBalance, got.MaxBalance)
			}
		})
	}
}
