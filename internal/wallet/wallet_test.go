package wallet_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/wallet"
)

func TestTransferRequestValidate(t *testing.T) {
	t.Parallel()
	valid := wallet.TransferRequest{IdempotencyKey: "k", FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "USD"}
	tests := []struct {
		name   string
		change func(r *wallet.TransferRequest)
		want   error
	}{
		{"a valid request passes", func(*wallet.TransferRequest) {}, nil},
		{"a key of 255 printable characters passes", func(r *wallet.TransferRequest) { r.IdempotencyKey = strings.Repeat("~", 255) }, nil},
		{"an empty key is invalid", func(r *wallet.TransferRequest) { r.IdempotencyKey = "" }, wallet.ErrInvalid},
		{"a key of 256 characters is invalid", func(r *wallet.TransferRequest) { r.IdempotencyKey = strings.Repeat("k", 256) }, wallet.ErrInvalid},
		{"a key with a non-ASCII character is invalid", func(r *wallet.TransferRequest) { r.IdempotencyKey = "kä" }, wallet.ErrInvalid},
		{"a wallet id of 65 characters is invalid", func(r *wallet.TransferRequest) { r.ToWalletID = strings.Repeat("b", 65) }, wallet.ErrInvalid},
		{"a wallet id with a dot is invalid", func(r *wallet.TransferRequest) { r.FromWalletID = "a.b" }, wallet.ErrInvalid},
		{"a zero amount is invalid", func(r *wallet.TransferRequest) { r.Amount = 0 }, wallet.ErrInvalid},
		{"a two-letter currency is invalid", func(r *wallet.TransferRequest) { r.Currency = "US" }, wallet.ErrInvalidCurrency},
		{"three letters that name no ISO 4217 currency are invalid", func(r *wallet.TransferRequest) { r.Currency = "ZZZ" }, wallet.ErrInvalidCurrency},
		{"a currency without minor units passes", func(r *wallet.TransferRequest) { r.Currency = "JPY" }, nil},
		{"one wallet on both sides is refused", func(r *wallet.TransferRequest) { r.ToWalletID = "a" }, wallet.ErrSameWallet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := valid
			tt.change(&req)
			err := req.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := wallet.Cursor{CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: uuid.Must(uuid.NewV7())}
	got, err := wallet.ParseCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, got)

	zero, err := wallet.ParseCursor("")
	require.NoError(t, err)
	require.True(t, zero.IsZero())
	require.Empty(t, zero.String())

	for _, bad := range []string{"!!", "AAAA", c.String() + "A"} {
		_, err := wallet.ParseCursor(bad)
		require.ErrorIs(t, err, wallet.ErrInvalidCursor, bad)
	}
}
