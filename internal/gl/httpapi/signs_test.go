package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/console"
	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
)

// One sign convention everywhere: an account's balance is positive on its normal side, in the
// API's balance, statement and trial balance and on the console's pages alike. A deposit of 500
// shows cash (1010, an asset: debit normal) and what is owed to the wallets (2010, a liability:
// credit normal) both at +500, and the console writes each amount in its currency's major
// units: 5.00 USD, 500 JPY, 0.500 BHD.
func TestADepositShowsBothAccountsPositiveInTheAPIAndTheConsole(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	ledger := postgres.NewLedger(pool)
	ctx := context.Background()
	for _, e := range []gl.Entry{entry("usd-1", "USD", 500), entry("jpy-1", "JPY", 500), entry("bhd-1", "BHD", 500)} {
		require.NoError(t, database.WithTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := ledger.Post(ctx, tx, e)
			return err
		}))
	}
	_, guard, key := authtest.Key(t, pool, auth.GLScopes)
	books := httpapi.Books{Ledger: ledger, Scope: "ledger:read"}
	c, err := console.New(console.Config{Service: "gl", Guard: guard, Metrics: metrics.New("gl"), Pages: books.Pages()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	api := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{Ledger: ledger, Guard: guard, Metrics: metrics.New("gl")}))
	b := &testBundle{ledger: ledger, server: api, key: key}

	t.Run("the API's balances", func(t *testing.T) {
		for _, code := range []string{"1010", "2010"} {
			var bal struct {
				Balance    int64 `json:"balance"`
				MinorUnits int   `json:"minor_units"`
			}
			status, _ := b.get(t, "/v1/accounts/"+code+"/balance?currency=USD", &bal)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, int64(500), bal.Balance, "account %s", code)
			require.Equal(t, 2, bal.MinorUnits)

			var st struct {
				Lines []struct {
					RunningBalance int64 `json:"running_balance"`
				} `json:"lines"`
			}
			status, _ = b.get(t, "/v1/accounts/"+code+"/statement?currency=USD", &st)
			require.Equal(t, http.StatusOK, status)
			require.Len(t, st.Lines, 1)
			require.Equal(t, int64(500), st.Lines[0].RunningBalance, "account %s's statement", code)
		}
		var tb struct {
			Accounts []struct {
				AccountCode   string `json:"account_code"`
				Currency      string `json:"currency"`
				NormalBalance string `json:"normal_balance"`
				Balance       int64  `json:"balance"`
			} `json:"accounts"`
		}
		status, _ := b.get(t, "/v1/trial-balance", &tb)
		require.Equal(t, http.StatusOK, status)
		require.Len(t, tb.Accounts, 6)
		for _, a := range tb.Accounts {
			require.Equal(t, int64(500), a.Balance, "account %s in %s (normal %s) in the trial balance", a.AccountCode, a.Currency, a.NormalBalance)
		}
	})

	t.Run("the console's pages", func(t *testing.T) {
		srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
		t.Cleanup(srv.Close)
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := browser.PostForm(srv.URL+"/console/login", url.Values{"key": {key}})
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		get := func(path string) string {
			t.Helper()
			res, err := browser.Get(srv.URL + path)
			require.NoError(t, err)
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, res.StatusCode, string(body))
			return string(body)
		}

		page := get("/console/trial-balance")
		for field, want := range map[string]string{
			"balance-1010-USD": "5.00", "balance-2010-USD": "5.00",
			"balance-1010-JPY": "500", "balance-2010-JPY": "500",
			"balance-1010-BHD": "0.500", "balance-2010-BHD": "0.500",
		} {
			require.Contains(t, page, `data-field="`+field+`">`+want+`<`, "trial balance, %s", field)
		}
		require.NotContains(t, page, "-5.00")

		for _, code := range []string{"1010", "2010"} {
			page := get("/console/accounts?code=" + code + "&currency=USD")
			require.Contains(t, page, `data-field="balance">5.00<`, "account %s's balance", code)
			require.Contains(t, page, `data-field="running-balance">5.00<`, "account %s's statement", code)
		}
		page = get("/console/accounts?code=2010&currency=JPY")
		require.Contains(t, page, `data-field="balance">500<`)

		// A currency that is no ISO 4217 code is refused with its problem type, as in the API.
		res, err = browser.Get(srv.URL + "/console/accounts?code=2010&currency=ZZZ")
		require.NoError(t, err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		require.Contains(t, string(body), "invalid-currency")
	})
}
