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
