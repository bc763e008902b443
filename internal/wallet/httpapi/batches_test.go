package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web/webtest"
)

type batchAnswer struct {
	ID        string            `json:"id"`
	Status    string            `json:"status"`
	Metadata  map[string]string `json:"metadata"`
	Reversals []string          `json:"reversals"`
	Transfers []struct {
		ID              string `json:"id"`
		BatchID         string `json:"batch_id"`
		BatchReversalID string `json:"batch_reversal_id"`
		FromWalletID    string `json:"from_wallet_id"`
		Amount          int64  `json:"amount"`
		Currency        string `json:"currency"`
	} `json:"transfers"`
}

type batchReversalAnswer struct {
	ID        string `json:"id"`
	BatchID   string `json:"batch_id"`
	Reversals []struct {
		ID                 string `json:"id"`
		ReversesTransferID string `json:"reverses_transfer_id"`
		BatchReversalID    string `json:"batch_reversal_id"`
		Amount             int64  `json:"amount"`
	} `json:"reversals"`
}

type legProblemAnswer struct {
	Type   string `json:"type"`
	Detail string `json:"detail"`
	Leg    *int   `json:"leg"`
}

func (b *testBundle) batch(t *testing.T, key, body string) webtest.Response {
	t.Helper()
	return b.do(t, http.MethodPost, "/v1/transfer-batches", http.Header{"Idempotency-Key": {key}}, body)
}

// requireLegProblem requires a problem of status and slug naming leg.
func requireLegProblem(t *testing.T, res webtest.Response, status int, slug string, leg int) legProblemAnswer {
	t.Helper()
	require.Equal(t, status, res.Status, res.Body)
	var p legProblemAnswer
	require.NoError(t, json.Unmarshal([]byte(res.Body), &p))
	require.Equal(t, "https://walletgl.dev/problems/"+slug, p.Type, res.Body)
	require.NotNil(t, p.Leg, res.Body)
	require.Equal(t, leg, *p.Leg, res.Body)
	return p
}

// rowCounts counts the rows of every table a batch writes, and the balances' sum per wallet.
func (b *testBundle) rowCounts(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"transfers", "transfer_batches", "batch_reversals", "outbox", "refusals"} {
		var n int64
		require.NoError(t, b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	rows, err := b.pool.Query(context.Background(), `SELECT id, balance FROM wallets`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id string
		var balance int64
		require.NoError(t, rows.Scan(&id, &balance))
		out["balance:"+id] = balance
	}
	require.NoError(t, rows.Err())
	return out
}

// batchWallets adds, beside setup's: fees (USD), a EUR mint, eve funded with 100 EUR, frank
// (EUR) and capped (USD, at most 100).
func (b *testBundle) batchWallets(t *testing.T) {
	t.Helper()
	for _, body := range []string{
		`{"id":"fees","currency":"USD"}`,
		`{"id":"mint-eur","currency":"EUR","allow_negative":true}`,
		`{"id":"frank","currency":"EUR"}`,
		`{"id":"capped","currency":"USD","max_balance":100}`,
	} {
		res := b.do(t, http.MethodPost, "/v1/wallets", nil, body)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}
	res := b.transfer(t, "fund-eve", `{"from_wallet_id":"mint-eur","to_wallet_id":"eve","amount":100,"currency":"EUR"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
}

// eventData is the data of the outbox rows of eventType about aggregate.
func (b *testBundle) eventData(t *testing.T, eventType, aggregate string) [][]byte {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1 AND aggregate_id = $2`, eventType, aggregate)
	require.NoError(t, err)
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var env struct {
			Data json.RawMessage `json:"data"`
		}
		var payload []byte
		require.NoError(t, rows.Scan(&payload))
		require.NoError(t, json.Unmarshal(payload, &env))
		out = append(out, env.Data)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireSchema validates data against eventType's JSON Schema, formats asserted.
func requireSchema(t *testing.T, eventType string, data []byte) {
	t.Helper()
	raw, ok := contract.Schema(eventType)
	require.True(t, ok, eventType)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "https://walletgl.example/events/schema/" + eventType + ".json"
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst), string(data))
}

const threeLegs = `{"transfers":[
	{"from_wallet_id":"alice","to_wallet_id":"bob","amount":300,"currency":"USD","reference":"order 7"},
	{"from_wallet_id":"alice","to_wallet_id":"fees","amount":20,"currency":"USD"},
	{"from_wallet_id":"eve","to_wallet_id":"frank","amount":50,"currency":"EUR"}],
	"metadata":{"order_id":"7"}}`

func TestABatchInTwoCurrenciesCommitsWithOneEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batchWallets(t)

	res := b.batch(t, "batch-1", threeLegs)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	require.Empty(t, res.Header.Get("Idempotency-Replayed"))
	var got batchAnswer
	res.Decode(t, &got)
	require.Equal(t, "completed", got.Status)
	require.Equal(t, map[string]string{"order_id": "7"}, got.Metadata)
	require.Len(t, got.Transfers, 3)
	for _, l := range got.Transfers {
		require.Equal(t, got.ID, l.BatchID)
	}
	require.Equal(t, []int64{680, 300, 20}, []int64{b.balance(t, "alice"), b.balance(t, "bob"), b.balance(t, "fees")})
	require.Equal(t, []int64{50, 50}, []int64{b.balance(t, "eve"), b.balance(t, "frank")})

	t.Run("one TransferBatchCompleted row, valid against its schema, and no TransferCompleted of a leg", func(t *testing.T) {
		data := b.eventData(t, contract.TypeTransferBatchCompleted, got.ID)
		require.Len(t, data, 1)
		requireSchema(t, contract.TypeTransferBatchCompleted, data[0])
		var ev contract.TransferBatchCompleted
		require.NoError(t, json.Unmarshal(data[0], &ev))
		require.NoError(t, ev.Validate())
		require.Equal(t, got.ID, ev.BatchID)
		require.Len(t, ev.Transfers, 3)
		require.Equal(t, contract.BatchLeg{TransferID: got.Transfers[0].ID, FromWalletID: "alice", ToWalletID: "bob", Amount: 300, Currency: "USD", Kind: contract.KindTransfer, Reference: "order 7"}, ev.Transfers[0])
		require.Equal(t, "EUR", ev.Transfers[2].Currency)
		require.Equal(t, map[string]string{"order_id": "7"}, map[string]string(ev.Metadata))
		for _, l := range got.Transfers {
			for _, typ := range []string{contract.TypeTransferCompleted, contract.TypeTransferCompletedV2} {
				require.Empty(t, b.eventData(t, typ, l.ID))
			}
		}
	})

	t.Run("the legs are transfers with batch_id, found by batch and by metadata", func(t *testing.T) {
		for _, path := range []string{"/v1/transfers?batch_id=" + got.ID, "/v1/transfers?metadata[order_id]=7", "/v1/transfers?batch_id=" + got.ID + "&wallet_id=eve"} {
			listed := b.listAll(t, b.key, path, 10)
			if strings.Contains(path, "eve") {
				require.Len(t, listed, 1, path)
				continue
			}
			require.Len(t, listed, 3, path)
		}
		res := b.do(t, http.MethodGet, "/v1/transfers/"+got.Transfers[1].ID, nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		require.Contains(t, res.Body, `"batch_id":"`+got.ID+`"`)
		res = b.do(t, http.MethodGet, "/v1/transfers/"+got.Transfers[1].ID, nil, "")
		require.Contains(t, res.Body, `"metadata":{"order_id":"7"}`)
		res = b.do(t, http.MethodGet, "/v1/transfers?batch_id=nope", b.invalid("a batch_id that is not a UUID"), "")
		res.RequireProblem(t, http.StatusBadRequest, "invalid-query")
	})

	t.Run("the batch reads back with no reversals", func(t *testing.T) {
		res := b.do(t, http.MethodGet, "/v1/transfer-batches/"+got.ID, nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var read batchAnswer
		res.Decode(t, &read)
		require.Equal(t, got.ID, read.ID)
		require.Len(t, read.Transfers, 3)
		require.NotNil(t, read.Reversals)
		require.Empty(t, read.Reversals)
		b.do(t, http.MethodGet, "/v1/transfer-batches/01a249a8-02ba-70ce-80be-d48c46b0425d", nil, "").RequireProblem(t, http.StatusNotFound, "batch-not-found")
	})

	t.Run("a replay answers the same batch; another body with the key is refused", func(t *testing.T) {
		res := b.batch(t, "batch-1", threeLegs)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
		var again batchAnswer
		res.Decode(t, &again)
		require.Equal(t, got.ID, again.ID)
		require.Equal(t, got.Transfers[2].ID, again.Transfers[2].ID)
		require.Equal(t, int64(680), b.balance(t, "alice"), "a replay moves nothing")
		res = b.batch(t, "batch-1", strings.Replace(threeLegs, `"amount":20`, `"amount":21`, 1))
		res.RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	})
	b.requireVerified(t)

	t.Run("verify finds a batch that lost its event", func(t *testing.T) {
		_, err := b.pool.Exec(context.Background(), `DELETE FROM outbox WHERE aggregate_id = $1`, got.ID)
		require.NoError(t, err)
		checks, err := postgres.Verify(context.Background(), b.pool, wallet.VerifyOptions{Retention: time.Hour})
		require.NoError(t, err)
		failed := map[string][]string{}
		for _, c := range checks {
			if c.Failed > 0 {
				failed[c.Name] = c.Sample
			}
		}
		require.Equal(t, []string{got.ID}, failed["every batch has its legs and one event, and every batch reversal reverses legs of its batch"])
		require.Len(t, failed["every transfer has exactly one outbox row"], 3, "each leg lost the batch's row")
	})
}

func TestARefusedLegWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batchWallets(t)
	first := `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":600,"currency":"USD"},
		{"from_wallet_id":"alice","to_wallet_id":"fees","amount":100,"currency":"USD"},`
	for _, c := range []struct {
		name, third, slug string
		status            int
	}{
		{"a third leg short of funds after the first two", `{"from_wallet_id":"alice","to_wallet_id":"bob","amount":301,"currency":"USD"}`, "insufficient-funds", 422},
		{"a third leg past its receiver's maximum", `{"from_wallet_id":"alice","to_wallet_id":"capped","amount":101,"currency":"USD"}`, "balance-above-maximum", 422},
		{"a third leg to a wallet that does not exist", `{"from_wallet_id":"alice","to_wallet_id":"nobody","amount":1,"currency":"USD"}`, "wallet-not-found", 404},
		{"a third leg in another currency than its wallets", `{"from_wallet_id":"eve","to_wallet_id":"frank","amount":1,"currency":"USD"}`, "currency-mismatch", 422},
		{"a third leg between one wallet", `{"from_wallet_id":"bob","to_wallet_id":"bob","amount":1,"currency":"USD"}`, "same-wallet", 422},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := b.rowCounts(t)
			res := b.batch(t, "refused-"+c.slug, `{"transfers":[`+first+c.third+`]}`)
			p := requireLegProblem(t, res, c.status, c.slug, 2)
			require.Contains(t, p.Detail, "leg 2")
			require.Equal(t, before, b.rowCounts(t), "no batch, transfer, outbox row, refusal or balance change")
			// Nothing is kept under the key: a batch that passes may take it.
			res = b.batch(t, "refused-"+c.slug, `{"transfers":[{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"}]}`)
			require.Equal(t, http.StatusCreated, res.Status, res.Body)
		})
	}

	t.Run("a leg's input error names it by a JSON pointer", func(t *testing.T) {
		before := b.rowCounts(t)
		res := b.do(t, http.MethodPost, "/v1/transfer-batches", b.invalidKey("leg-amount", "an amount of 0"),
			`{"transfers":[{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD"},{"from_wallet_id":"alice","to_wallet_id":"bob","amount":0,"currency":"USD"}]}`)
		p := requireLegProblem(t, res, http.StatusBadRequest, "invalid-request", 1)
		require.Contains(t, p.Detail, "/transfers/1/amount")
		res = b.batch(t, "leg-currency", `{"transfers":[{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"XYZ"}]}`)
		p = requireLegProblem(t, res, http.StatusBadRequest, "invalid-currency", 0)
		require.Contains(t, p.Detail, "/transfers/0/currency")
		require.Equal(t, before, b.rowCounts(t))
	})

	t.Run("101 legs are refused, 100 pass", func(t *testing.T) {
		leg := `{"from_wallet_id":"mint","to_wallet_id":"bob","amount":1,"currency":"USD"}`
		legs := strings.TrimSuffix(strings.Repeat(leg+",", 101), ",")
		res := b.do(t, http.MethodPost, "/v1/transfer-batches", b.invalidKey("legs-101", "101 legs"), `{"transfers":[`+legs+`]}`)
		res.RequireProblem(t, http.StatusBadRequest, "invalid-request")
		legs = strings.TrimSuffix(strings.Repeat(leg+",", 100), ",")
		res = b.batch(t, "legs-100", `{"transfers":[`+legs+`]}`)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	})
	b.requireVerified(t)
}

// invalidKey is the header of a request against the document on purpose, with an
// Idempotency-Key.
func (b *testBundle) invalidKey(key, reason string) http.Header {
	h := b.invalid(reason)
	h.Set("Idempotency-Key", key)
	return h
}

// Batches and single transfers over the same wallets, in every order, run at once: each
// answers (none is rolled back by a deadlock) and the books balance.
func TestConcurrentBatchesAndTransfersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batchWallets(t)
	res := b.transfer(t, "fund-bob", `{"from_wallet_id":"mint","to_wallet_id":"bob","amount":1000,"currency":"USD"}`)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	const workers, rounds = 6, 10
	var wg sync.WaitGroup
	statuses := make(chan int, workers*rounds*2)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				a, c := "alice", "bob"
				if (w+r)%2 == 1 {
					a, c = c, a
				}
				body := fmt.Sprintf(`{"transfers":[{"from_wallet_id":%q,"to_wallet_id":%q,"amount":3,"currency":"USD"},{"from_wallet_id":%q,"to_wallet_id":"fees","amount":1,"currency":"USD"},{"from_wallet_id":%q,"to_wallet_id":%q,"amount":2,"currency":"USD"}]}`, a, c, c, c, a)
				statuses <- webtest.Do(t, http.MethodPost, b.url+"/v1/transfer-batches", http.Header{"Idempotency-Key": {fmt.Sprintf("c-%d-%d", w, r)}, "Authorization": {"Bearer " + b.key}}, body).Status
				statuses <- webtest.Do(t, http.MethodPost, b.url+"/v1/transfers", http.Header{"Idempotency-Key": {fmt.Sprintf("s-%d-%d", w, r)}, "Authorization": {"Bearer " + b.key}},
					fmt.Sprintf(`{"from_wallet_id":%q,"to_wallet_id":%q,"amount":1,"currency":"USD"}`, c, a)).Status
			}
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		require.Equal(t, http.StatusCreated, s)
	}
	require.Equal(t, int64(workers*rounds), b.balance(t, "fees"))
	b.requireVerified(t)
}

func TestABatchIsReversedWithItsBatchOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.batchWallets(t)
	res := b.batch(t, "to-reverse", threeLegs)
	require.Equal(t, http.StatusCreated, res.Status, res.Body)
	var batch batchAnswer
	res.Decode(t, &batch)
	reverse := func(key, body string, h http.Header) webtest.Response {
		if h == nil {
			h = http.Header{}
		}
		h.Set("Idempotency-Key", key)
		return b.do(t, http.MethodPost, "/v1/transfer-batches/"+batch.ID+"/reversals", h, body)
	}

	t.Run("a leg alone is refused with transfer-in-batch", func(t *testing.T) {
		res := b.do(t, http.MethodPost, "/v1/transfers/"+batch.Transfers[0].ID+"/reversal", http.Header{"Idempotency-Key": {"single"}}, `{}`)
		res.RequireProblem(t, http.StatusConflict, "transfer-in-batch")
	})

	var chosen batchReversalAnswer
	t.Run("chosen legs are reversed in full, with one event; a replay answers the same", func(t *testing.T) {
		body := fmt.Sprintf(`{"transfers":[%q,%q],"metadata":{"reason":"refund"}}`, batch.Transfers[2].ID, batch.Transfers[0].ID)
		res := reverse("rev-chosen", body, nil)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		res.Decode(t, &chosen)
		require.Equal(t, batch.ID, chosen.BatchID)
		require.Len(t, chosen.Reversals, 2)
		require.Equal(t, batch.Transfers[0].ID, chosen.Reversals[0].ReversesTransferID, "in the batch's order")
		require.Equal(t, chosen.ID, chosen.Reversals[0].BatchReversalID)
		require.Equal(t, int64(300), chosen.Reversals[0].Amount)
		require.Equal(t, []int64{980, 0, 20, 100, 0}, []int64{b.balance(t, "alice"), b.balance(t, "bob"), b.balance(t, "fees"), b.balance(t, "eve"), b.balance(t, "frank")})
		data := b.eventData(t, contract.TypeTransferBatchReversed, chosen.ID)
		require.Len(t, data, 1)
		requireSchema(t, contract.TypeTransferBatchReversed, data[0])

		res = reverse("rev-chosen", body, nil)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Equal(t, "true", res.Header.Get("Idempotency-Replayed"))
		var again batchReversalAnswer
		res.Decode(t, &again)
		require.Equal(t, chosen.ID, again.ID)
		reverse("rev-chosen", `{}`, nil).RequireProblem(t, http.StatusUnprocessableEntity, "idempotency-key-reused")
	})

	t.Run("a leg reversed already is refused and nothing is written", func(t *testing.T) {
		before := b.rowCounts(t)
		res := reverse("rev-all", `{}`, nil)
		requireLegProblem(t, res, http.StatusUnprocessableEntity, "transfer-fully-reversed", 0)
		require.Equal(t, before, b.rowCounts(t))
		res = reverse("rev-other", fmt.Sprintf(`{"transfers":[%q]}`, batch.Transfers[1].ID), nil)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
		require.Equal(t, int64(1000), b.balance(t, "alice"))
		res = reverse("rev-unknown", `{"transfers":["01a249a8-02ba-70ce-80be-d48c46b0425d"]}`, nil)
		requireLegProblem(t, res, http.StatusNotFound, "transfer-not-found", 0)
	})

	t.Run("the batch lists its reversals", func(t *testing.T) {
		res := b.do(t, http.MethodGet, "/v1/transfer-batches/"+batch.ID, nil, "")
		require.Equal(t, http.StatusOK, res.Status, res.Body)
		var read batchAnswer
		res.Decode(t, &read)
		require.Len(t, read.Reversals, 2)
		require.Equal(t, chosen.ID, read.Reversals[0])
	})
	b.requireVerified(t)
}
