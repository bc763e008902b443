package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A control account answers per wallet: its balance and statement with wallet_id are the
// wallet's sub-account, the lines that name it.
func TestAControlAccountAnswersPerWallet(t *testing.T) {
	t.Parallel()
	toBob := entry("t-bob", "USD", 30)
	toBob.Lines[0].WalletID, toBob.Lines[1].WalletID = "bank", "bob"
	b := setup(t, entry("t-1", "USD", 100), entry("t-2", "USD", 50), toBob)

	tests := []struct {
		name string
		path string
		want string
	}{
		{"a wallet's balance sums its lines of the account", "/v1/accounts/2010/balance?currency=USD&wallet_id=w-to",
			`{"account_code":"2010","currency":"USD","minor_units":2,"wallet_id":"w-to","normal_balance":"credit","as_of":null,"debits":0,"credits":150,"balance":150}`},
		{"another wallet's sub-account is its own", "/v1/accounts/2010/balance?currency=USD&wallet_id=bob",
			`{"account_code":"2010","currency":"USD","minor_units":2,"wallet_id":"bob","normal_balance":"credit","as_of":null,"debits":0,"credits":30,"balance":30}`},
		{"a wallet without lines on the account has zeros", "/v1/accounts/2010/balance?currency=USD&wallet_id=w-from",
			`{"account_code":"2010","currency":"USD","minor_units":2,"wallet_id":"w-from","normal_balance":"credit","as_of":null,"debits":0,"credits":0,"balance":0}`},
		{"a wallet's balance as of a time before any posting is zero", "/v1/accounts/2010/balance?currency=USD&wallet_id=w-to&as_of=2000-01-01T00:00:00Z",
			`{"account_code":"2010","currency":"USD","minor_units":2,"wallet_id":"w-to","normal_balance":"credit","as_of":"2000-01-01T00:00:00Z","debits":0,"credits":0,"balance":0}`},
		{"without wallet_id the whole account answers", "/v1/accounts/2010/balance?currency=USD",
			`{"account_code":"2010","currency":"USD","minor_units":2,"normal_balance":"credit","as_of":null,"debits":0,"credits":180,"balance":180}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body json.RawMessage
			status, _ := b.get(t, tt.path, &body)
			require.Equal(t, http.StatusOK, status, string(body))
			require.JSONEq(t, tt.want, string(body))
		})
	}

	t.Run("a wallet's statement lists its lines with its own running balance", func(t *testing.T) {
		t.Parallel()
		var st struct {
			WalletID string `json:"wallet_id"`
			Lines    []struct {
				TransferID     string `json:"transfer_id"`
				RunningBalance int64  `json:"running_balance"`
			} `json:"lines"`
			NextCursor *string `json:"next_cursor"`
		}
		status, _ := b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=w-to&limit=1", &st)
		require.Equal(t, http.StatusOK, status)
		require.Equal(t, "w-to", st.WalletID)
		require.Len(t, st.Lines, 1)
		require.Equal(t, "t-1", st.Lines[0].TransferID)
		require.NotNil(t, st.NextCursor)
		status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=w-to&after="+*st.NextCursor, &st)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, st.Lines, 1, "bob's line is not w-to's")
		require.Equal(t, "t-2", st.Lines[0].TransferID)
		require.Equal(t, int64(150), st.Lines[0].RunningBalance, "carried across pages, w-to's lines only")
		require.Nil(t, st.NextCursor)
	})

	t.Run("a wallet's statement takes a time range and refuses another wallet's cursor", func(t *testing.T) {
		t.Parallel()
		type statement struct {
			Lines []struct {
				LineID         int64 `json:"line_id"`
				RunningBalance int64 `json:"running_balance"`
			} `json:"lines"`
		}
		var st statement
		status, _ := b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=w-to&from=2000-01-01T00:00:00Z", &st)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, st.Lines, 2)
		require.Equal(t, int64(150), st.Lines[1].RunningBalance)
		status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=w-to&to=2000-01-01T00:00:00Z", &st)
		require.Equal(t, http.StatusOK, status)
		require.Empty(t, st.Lines, "nothing was posted before 2000")

		var bob statement
		status, _ = b.get(t, "/v1/accounts/2010/statement?currency=USD&wallet_id=bob", &bob)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, bob.Lines, 1)
		b.requireProblem(t, fmt.Sprintf("/v1/accounts/2010/statement?currency=USD&wallet_id=w-to&after=%d", bob.Lines[0].LineID),
			http.StatusBadRequest, "invalid-cursor")
	})

	for _, path := range []string{
		"/v1/accounts/2010/balance?currency=USD&wallet_id=" + "a%20b",
		"/v1/accounts/2010/statement?currency=USD&wallet_id=",
	} {
		t.Run("a malformed wallet_id is a bad request: "+path, func(t *testing.T) {
			t.Parallel()
			b.requireInvalid(t, path, http.StatusBadRequest, "invalid-wallet-id")
		})
	}
}
