package posting_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
)

type testBundle struct {
	pool   *pgxpool.Pool
	ledger *postgres.Ledger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "gl")
	return &testBundle{pool: pool, ledger: postgres.NewLedger(pool)}
}

// handle runs the handler in a transaction on the test pool, as the consumer would.
func (b *testBundle) handle(t *testing.T, h inbox.Handler, env contract.Envelope) error {
	t.Helper()
	return database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		return h.Handle(context.Background(), tx, []contract.Envelope{env})
	})
}

// acknowledgments returns the postings the TransferPosted.v2 events in the GL's outbox name.
func (b *testBundle) acknowledgments(t *testing.T) []contract.TransferPosted {
	t.Helper()
	var acks []contract.TransferPosted
	for _, postings := range b.acknowledgmentEvents(t) {
		acks = append(acks, postings...)
	}
	return acks
}

// acknowledgmentEvents returns the postings of each acknowledgment in the GL's outbox, one
// slice per event.
func (b *testBundle) acknowledgmentEvents(t *testing.T) [][]contract.TransferPosted {
	t.Helper()
	rows, err := admin.New(b.pool).ListOutbox(context.Background(), contract.StatusPending, 100)
	require.NoError(t, err)
	acks := make([][]contract.TransferPosted, 0, len(rows))
	for _, row := range rows {
		require.Equal(t, contract.TypeTransferPostedV2, row.EventType)
		env, err := contract.DecodeEnvelope(row.Payload)
		require.NoError(t, err)
		require.Equal(t, contract.SourceGL, env.Source)
		require.Equal(t, row.AggregateID, env.Subject)
		postings, err := contract.DecodePostings(env)
		require.NoError(t, err)
		require.Equal(t, row.AggregateID, postings[0].TransferID, "the aggregate is the first posting's transfer")
		acks = append(acks, postings)
	}
	return acks
}

func transferCompleted(t *testing.T, transferID string, amount int64, currency string) contract.Envelope {
	t.Helper()
	data, err := json.Marshal(contract.TransferCompleted{
		TransferID: transferID, FromWalletID: "w-from", ToWalletID: "w-to",
		Amount: amount, Currency: currency, CreatedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: contract.TypeTransferCompleted, Subject: transferID, Time: time.Now().UTC(),
		DataContentType: "application/json", Data: data,
	}
}

func newTransferID() string { return "tr-" + uuid.Must(uuid.NewV7()).String() }

func TestHandlerPostsBalancedEntryAndAcknowledges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	transferID := newTransferID()
	env := transferCompleted(t, transferID, 1250, "USD")

	require.NoError(t, b.handle(t, h, env))

	entries, err := b.ledger.EntriesByTransfer(context.Background(), transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, env.ID, e.EventID)
	require.Equal(t, transferID, e.TransferID)
	require.Equal(t, "USD", e.Currency)
	require.True(t, e.OccurredAt.Equal(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)))
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Debit, Amount: 1250, WalletID: "w-from"},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 1250, WalletID: "w-to"},
	}, e.Lines)
	require.True(t, e.Balanced())

	acks := b.acknowledgments(t)
	require.Len(t, acks, 1)
	require.Equal(t, transferID, acks[0].TransferID)
	require.Equal(t, env.ID, acks[0].SourceEventID)
	require.Equal(t, e.ID.String(), acks[0].EntryID)
	require.True(t, acks[0].PostedAt.Equal(e.PostedAt), "ack posted_at %v, entry %v", acks[0].PostedAt, e.PostedAt)
}

func TestHandlerRefusesAnotherEventForAPostedTransferAndAcknowledgesACopy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs bytes.Buffer
	h := posting.New(b.ledger, zerolog.New(&logs))
	transferID := newTransferID()
	first := transferCompleted(t, transferID, 500, "EUR")
	second := transferCompleted(t, transferID, 500, "EUR") // same transfer, new event id

	require.NoError(t, b.handle(t, h, first))
	require.ErrorIs(t, b.handle(t, h, second), contract.ErrConflict, "another event for a posted movement is not a copy")
	require.NoError(t, b.handle(t, h, first), "a replay of the same event past the inbox is a duplicate")

	entries, err := b.ledger.EntriesByTransfer(context.Background(), transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, first.ID, entries[0].EventID)

	acks := b.acknowledgments(t)
	require.Len(t, acks, 2, "the conflicting event is never acknowledged")
	for i := range acks {
		require.Equal(t, first.ID, acks[i].SourceEventID)
		require.Equal(t, entries[0].ID.String(), acks[i].EntryID, "every acknowledgment names the stored entry")
	}

	var logged struct {
		Level   string `json:"level"`
		Message string `json:"message"`
		EventID string `json:"event_id"`
	}
	line, err := logs.ReadBytes('\n')
	require.NoError(t, err, "the same event past the inbox is logged")
	require.NoError(t, json.Unmarshal(line, &logged))
	require.Equal(t, "info", logged.Level)
	require.Equal(t, "event posted before and unknown to the inbox; acknowledging it again", logged.Message)
	require.Equal(t, first.ID, logged.EventID)

	tb, err := b.ledger.TrialBalance(context.Background())
	require.NoError(t, err)
	require.Equal(t, []gl.CurrencyTotal{{Currency: "EUR", Debits: gl.SumOf(500), Credits: gl.SumOf(500), Balanced: true}}, tb.Currencies)
}

func TestHandlerRejectsMalformedEventsWithoutWriting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())

	wrongType := transferCompleted(t, newTransferID(), 100, "USD")
	wrongType.Type = contract.TypeTransferPosted
	undecodable := transferCompleted(t, newTransferID(), 100, "USD")
	undecodable.Data = json.RawMessage(`{"amount":"a lot"}`)
	notAnObject := transferCompleted(t, newTransferID(), 100, "USD")
	notAnObject.Data = json.RawMessage(`[1,2]`)

	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"an amount of zero", transferCompleted(t, newTransferID(), 0, "USD")},
		{"a negative amount", transferCompleted(t, newTransferID(), -1, "USD")},
		{"a lower-case currency", transferCompleted(t, newTransferID(), 100, "usd")},
		{"a currency that is not three letters", transferCompleted(t, newTransferID(), 100, "DOLLAR")},
		{"an empty transfer id", transferCompleted(t, "", 100, "USD")},
		{"an event of another type", wrongType},
		{"data that does not decode", undecodable},
		{"data that is not an object", notAnObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := b.handle(t, h, tt.env)
			require.Error(t, err)
			require.ErrorIs(t, err, contract.ErrMalformed)
		})
	}

	tb, err := b.ledger.TrialBalance(context.Background())
	require.NoError(t, err)
	require.Empty(t, tb.Accounts)
	require.Empty(t, b.acknowledgments(t))
}

func TestHandlerRefusesEventIDReusedForAnotherTransfer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	first := transferCompleted(t, newTransferID(), 100, "USD")
	reused := transferCompleted(t, newTransferID(), 100, "USD")
	reused.ID = first.ID

	require.NoError(t, b.handle(t, h, first))
	err := b.handle(t, h, reused)
	require.ErrorIs(t, err, contract.ErrConflict)
	require.Len(t, b.acknowledgments(t), 1)
}

// A forged or corrupted event that names a posted transfer with other figures is a conflict:
// nothing is posted and nothing is acknowledged, in a batch or alone.
func TestHandlerRefusesAPostedTransferWithOtherFigures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	transferID := newTransferID()
	require.NoError(t, b.handle(t, h, transferCompleted(t, transferID, 500, "EUR")))

	otherWallet := transferCompleted(t, transferID, 500, "EUR")
	otherWallet.Data = json.RawMessage(strings.Replace(string(otherWallet.Data), "w-to", "w-thief", 1))
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"another amount", transferCompleted(t, transferID, 5_000_000, "EUR")},
		{"another currency", transferCompleted(t, transferID, 500, "CHF")},
		{"another receiving wallet", otherWallet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, b.handle(t, h, tt.env), contract.ErrConflict)
			err := database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
				return h.Handle(context.Background(), tx, []contract.Envelope{transferCompleted(t, newTransferID(), 1, "EUR"), tt.env})
			})
			require.ErrorIs(t, err, contract.ErrConflict, "in a batch too")
		})
	}
	require.Len(t, b.acknowledgments(t), 1, "only the real posting is acknowledged")
	tb, err := b.ledger.TrialBalance(context.Background())
	require.NoError(t, err)
	require.Equal(t, []gl.CurrencyTotal{{Currency: "EUR", Debits: gl.SumOf(500), Credits: gl.SumOf(500), Balanced: true}}, tb.Currencies)
}

// A duplicate of a posted event is answered with a fresh acknowledgment that names the stored
// entry: the wallet is still waiting for one.
func TestHandlerAnswersADuplicateWithAFreshAcknowledgment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	env := transferCompleted(t, newTransferID(), 700, "USD")
	require.NoError(t, b.handle(t, h, env))
	require.NoError(t, database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		return h.HandleDuplicates(context.Background(), tx, []contract.Envelope{env})
	}))

	entries, err := b.ledger.EntriesByTransfer(context.Background(), env.Subject)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing posted twice")
	acks := b.acknowledgments(t)
	require.Len(t, acks, 2)
	for _, ack := range acks {
		require.Equal(t, env.ID, ack.SourceEventID)
		require.Equal(t, entries[0].ID.String(), ack.EntryID)
	}
}

func TestHandlerHonoursCustomPostingRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The rules are data: this set posts the reverse of the default.
	rule := gl.Rule{EventType: contract.TypeTransferCompleted, Kind: contract.KindUnspecified,
		PostingRule: gl.PostingRule{DebitAccount: "2010", CreditAccount: "1010"}}
	require.NoError(t, rule.CheckAccounts(context.Background(), b.ledger))
	h := posting.New(b.ledger, zerolog.Nop()).WithRules(gl.NewRules([]gl.Rule{rule}))
	transferID := newTransferID()

	require.NoError(t, b.handle(t, h, transferCompleted(t, transferID, 42, "GBP")))

	entries, err := b.ledger.EntriesByTransfer(context.Background(), transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, []gl.Line{
		{AccountCode: "2010", Direction: gl.Debit, Amount: 42, WalletID: "w-from"},
		{AccountCode: "1010", Direction: gl.Credit, Amount: 42, WalletID: "w-to"},
	}, entries[0].Lines)
}
