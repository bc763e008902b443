package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/console"
	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
)

func TestABatchEntryShowsEachLinesCurrencyLegAndKind(t *testing.T) {
	t.Parallel()
	batchID, usd, eur := uuid.NewString(), uuid.NewString(), uuid.NewString()
	raw, err := json.Marshal(contract.TransferBatchCompleted{BatchID: batchID, CreatedAt: time.Now().UTC(), Transfers: []contract.BatchLeg{
		{TransferID: usd, FromWalletID: "bank", ToWalletID: "alice", Amount: 1250, Currency: "USD", Kind: contract.KindDeposit},
		{TransferID: eur, FromWalletID: "bob", ToWalletID: "carol", Amount: 80, Currency: "EUR", Kind: contract.KindTransfer},
	}})
	require.NoError(t, err)
	e, err := gl.BatchEntry(contract.Envelope{ID: uuid.NewString(), Type: contract.TypeTransferBatchCompleted, Data: raw}, gl.DefaultRules())
	require.NoError(t, err)
	b := setup(t, e)

	var page struct {
		Entries []struct {
			TransferID string `json:"transfer_id"`
			Currency   string `json:"currency"`
			Kind       string `json:"kind"`
			Lines      []struct {
				AccountCode string `json:"account_code"`
				Amount      int64  `json:"amount"`
				Currency    string `json:"currency"`
				TransferID  string `json:"transfer_id"`
				LegKind     string `json:"leg_kind"`
			} `json:"lines"`
		} `json:"entries"`
	}
	status, _ := b.get(t, "/v1/entries?transfer_id="+eur, &page) // a leg's id finds its batch
	require.Equal(t, http.StatusOK, status)
	require.Len(t, page.Entries, 1)
	got := page.Entries[0]
	require.Equal(t, batchID, got.TransferID)
	require.Equal(t, gl.MultiCurrency, got.Currency)
	require.Equal(t, gl.KindBatch, got.Kind)
	require.Len(t, got.Lines, 4)
	for i, want := range []struct{ currency, leg, kind string }{
		{"USD", usd, contract.KindDeposit}, {"USD", usd, contract.KindDeposit}, {"EUR", eur, contract.KindTransfer}, {"EUR", eur, contract.KindTransfer},
	} {
		require.Equal(t, want.currency, got.Lines[i].Currency, "line %d", i)
		require.Equal(t, want.leg, got.Lines[i].TransferID, "line %d", i)
		require.Equal(t, want.kind, got.Lines[i].LegKind, "line %d", i)
	}

	c, err := console.New(console.Config{Service: "gl", Guard: b.guard, Metrics: metrics.New("gl"),
		Pages: httpapi.Books{Ledger: b.ledger, Scope: httpapi.ScopeLedgerRead}.Pages()})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login, err := browser.PostForm(srv.URL+"/console/login", url.Values{"key": {b.key}})
	require.NoError(t, err)
	login.Body.Close()
	res, err := browser.Get(srv.URL + "/console/entries?id=" + batchID)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.Contains(t, string(body), "several currencies")
	require.Contains(t, string(body), `<a href="/console/entries?id=`+eur+`"><code>`+eur+`</code></a></td><td>transfer</td>`, "each line links its leg and names its kind")
	require.Contains(t, string(body), "12.50 USD")
	require.Contains(t, string(body), "0.80 EUR")
}
