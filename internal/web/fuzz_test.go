package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// transferBody has the shape of the wallet's transfer request: what Decode guards most.
type transferBody struct {
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	AllowNeg     bool   `json:"allow_negative"`
}

// FuzzDecode feeds Decode any body. It must never panic; a refusal is always a problem.Error
// (never a bare error that would become a 500); and what it accepts holds no duplicate name
// and decodes to the same value when written back.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"USD"}`,
		`{"amount":1,"amount":7}`,
		`{"allow_negative":false,"allow_negative":true}`,
		`{"Amount":1}`,
		`{"amount":1.5}`,
		`{"amount":9223372036854775808}`,
		`{"amount":-9223372036854775808}`,
		`{} {}`,
		`[]`,
		`"x"`,
		``,
		`{"currency":"\u0000"}`,
		`{"from_wallet_id":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/transfers", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		got, err := web.Decode[transferBody](httptest.NewRecorder(), req)
		if err != nil {
			var appErr *problem.Error
			require.ErrorAs(t, err, &appErr, "a refusal is a problem, not a 500")
			return
		}
		dec := jsontext.NewDecoder(bytes.NewReader(body)) // rejects duplicate names by default
		for {
			if _, err := dec.ReadToken(); err != nil {
				require.ErrorContains(t, err, "EOF", "an accepted body is one value with no duplicate name")
				break
			}
		}
		again, err := json.Marshal(got)
		require.NoError(t, err)
		req = httptest.NewRequest(http.MethodPost, "/v1/transfers", bytes.NewReader(again))
		req.Header.Set("Content-Type", "application/json")
		round, err := web.Decode[transferBody](httptest.NewRecorder(), req)
		require.NoError(t, err)
		require.Equal(t, got, round)
	})
}
