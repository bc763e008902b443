package contract_test

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
)

// compileSchema compiles eventType's schema, with formats (date-time, uuid) asserted.
func compileSchema(t *testing.T, eventType string) *jsonschema.Schema {
	t.Helper()
	raw, ok := contract.Schema(eventType)
	require.True(t, ok, "no schema for %s in internal/events/schema", eventType)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "https://walletgl.example/events/schema/" + eventType + ".json"
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err, eventType)
	return s
}

func validateJSON(t *testing.T, s *jsonschema.Schema, data []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	require.NoError(t, err)
	return s.Validate(inst)
}

func TestEveryProducedTypeHasASchema(t *testing.T) {
	t.Parallel()
	types := contract.EventTypes()
	sort.Strings(types)
	for _, typ := range types {
		compileSchema(t, typ)
	}
}

func TestProducedEventsMatchTheirSchema(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	transfer := contract.TransferCompleted{
		TransferID: "01a22e0f-2372-76a7-a215-8cada9317c9a", FromWalletID: "w-1", ToWalletID: "w-2",
		Amount: 1250, Currency: "EUR", Kind: contract.KindWithdrawal, Reference: "invoice 2026-114 ✓",
		Metadata: map[string]string{"order_id": "123", "shop.region": "eu-1 ✓"}, CreatedAt: at,
	}
	batch := contract.TransferBatchCompleted{BatchID: "b-1", Metadata: map[string]string{"order_id": "123"}, CreatedAt: at, Transfers: []contract.BatchLeg{
		{TransferID: "t-1", FromWalletID: "w-1", ToWalletID: "w-2", Amount: 1000, Currency: "EUR", Kind: contract.KindTransfer, Reference: "order 123"},
		{TransferID: "t-2", FromWalletID: "w-1", ToWalletID: "fees", Amount: 25, Currency: "EUR", Kind: contract.KindTransfer},
		{TransferID: "t-3", FromWalletID: "bank-usd", ToWalletID: "w-1", Amount: 700, Currency: "USD", Kind: contract.KindDeposit},
	}}
	batchReversal := contract.TransferBatchReversed{BatchReversalID: "br-1", BatchID: "b-1", CreatedAt: at, Reversals: []contract.BatchLegReversal{
		{ReversalID: "r-1", TransferID: "t-1", FromWalletID: "w-2", ToWalletID: "w-1", Amount: 1000, Currency: "EUR"},
	}}
	posted := contract.TransferPosted{TransferID: "t-1", SourceEventID: "e-1", EntryID: "01a22e0f-2372-76a7-a215-8cada9317c9a", PostedAt: at}
	valid := map[string][]any{
		contract.TypeTransferCompleted: {transfer.AsVersion(contract.TypeTransferCompleted)},
		contract.TypeTransferCompletedV2: {transfer, func() any {
			noRef := transfer
			noRef.Reference, noRef.Kind, noRef.Metadata = "", contract.KindTransfer, nil
			return noRef
		}()},
		contract.TypeTransferReversed: {
			contract.TransferReversed{ReversalID: "r-1", TransferID: "t-1", FromWalletID: "w-2", ToWalletID: "w-1", Amount: 5, Currency: "EUR", CreatedAt: at},
			contract.TransferReversed{ReversalID: "r-1", TransferID: "t-1", FromWalletID: "w-2", ToWalletID: "w-1", Amount: 5, Currency: "EUR",
				Metadata: map[string]string{"case": "cb-9"}, CreatedAt: at},
		},
		contract.TypeTransferPosted:   {posted},
		contract.TypeTransferPostedV2: {contract.TransferPostings{Postings: []contract.TransferPosted{posted, posted}}},
		contract.TypeHoldPlaced: {
			contract.HoldPlaced{HoldID: "h-1", WalletID: "w-1", Amount: 9, Currency: "EUR", ExpiresAt: at.Add(time.Hour), CreatedAt: at},
			contract.HoldPlaced{HoldID: "h-1", WalletID: "w-1", Amount: 9, Currency: "EUR", ExpiresAt: at.Add(time.Hour),
				Metadata: map[string]string{"order_id": "123"}, CreatedAt: at},
		},
		contract.TypeHoldCaptured: {contract.HoldCaptured{HoldID: "h-1", TransferID: "t-2", WalletID: "w-1", ToWalletID: "w-3",
			Amount: 9, CapturedAmount: 7, Currency: "EUR", CreatedAt: at}},
		contract.TypeHoldVoided: {contract.HoldVoided{HoldID: "h-1", WalletID: "w-1", Amount: 9, Currency: "EUR", Reason: contract.VoidExpired, CreatedAt: at}},
		contract.TypeTransferBatchCompleted: {batch, func() any {
			bare := batch
			bare.Metadata = nil
			return bare
		}()},
		contract.TypeTransferBatchReversed: {batchReversal},
	}
	require.ElementsMatch(t, contract.EventTypes(), keys(valid), "a valid example of every produced type")
	for typ, examples := range valid {
		s := compileSchema(t, typ)
		for _, ex := range examples {
			data, err := json.Marshal(ex)
			require.NoError(t, err)
			require.NoError(t, validateJSON(t, s, data), "%s %s", typ, data)
		}
	}
}

func TestSchemasRefuseInvalidEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ, data string
	}{
		{contract.TypeTransferCompleted, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":0,"currency":"EUR","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferCompleted, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"eur","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferCompleted, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"yesterday"}`},
		{contract.TypeTransferCompleted, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"deposit"}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"unspecified"}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"deposit","reference":"` + strings.Repeat("x", contract.MaxReferenceLength+1) + `"}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"deposit","metadata":{"order id":"1"}}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"deposit","metadata":{"order_id":1}}`},
		{contract.TypeTransferCompletedV2, `{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","kind":"deposit","metadata":{"k":"` + strings.Repeat("x", 257) + `"}}`},
		{contract.TypeTransferReversed, `{"reversal_id":"r","transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR"}`},
		{contract.TypeTransferPosted, `{"transfer_id":"t","source_event_id":"e","entry_id":"not-a-uuid","posted_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferPostedV2, `{"postings":[]}`},
		{contract.TypeHoldPlaced, `{"hold_id":"h","wallet_id":"w","amount":-3,"currency":"EUR","expires_at":"2026-11-30T12:00:00Z","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeHoldPlaced, `{"hold_id":"h","wallet_id":"w","amount":3,"currency":"EUR","expires_at":"2026-11-30T12:00:00Z","created_at":"2026-11-30T12:00:00Z","metadata":{"order id":"1"}}`},
		{contract.TypeHoldPlaced, `{"hold_id":"h","wallet_id":"w","amount":3,"currency":"EUR","expires_at":"2026-11-30T12:00:00Z","created_at":"2026-11-30T12:00:00Z","metadata":{"order_id":1}}`},
		{contract.TypeTransferReversed, `{"reversal_id":"r","transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","created_at":"2026-11-30T12:00:00Z","metadata":{"k":"` + strings.Repeat("x", 257) + `"}}`},
		{contract.TypeHoldCaptured, `{"hold_id":"h","wallet_id":"w","amount":3,"currency":"EUR","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeHoldVoided, `{"hold_id":"h","wallet_id":"w","amount":3,"currency":"EUR","reason":"bored","created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferBatchCompleted, `{"batch_id":"b","transfers":[],"created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferBatchCompleted, `{"batch_id":"b","transfers":[{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR"}],"created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferBatchCompleted, `{"batch_id":"b","transfers":[{"transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"EUR","kind":"transfer","metadata":{"k":"v"}}],"created_at":"2026-11-30T12:00:00Z"}`},
		{contract.TypeTransferBatchReversed, `{"batch_reversal_id":"r","batch_id":"b","reversals":[{"reversal_id":"r1","transfer_id":"t","from_wallet_id":"a","to_wallet_id":"b","amount":0,"currency":"EUR"}],"created_at":"2026-11-30T12:00:00Z"}`},
	} {
		require.Error(t, validateJSON(t, compileSchema(t, tc.typ), []byte(tc.data)), "%s %s", tc.typ, tc.data)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
