package posting_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
	"walletgl/internal/metadata"
)

var batchTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func envelopeOf(t *testing.T, typ, subject string, data any) contract.Envelope {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: typ, Subject: subject, Time: time.Now().UTC(), DataContentType: "application/json", Data: raw,
	}
}

// threeLegs is a batch of a USD deposit into w-a, a USD transfer from w-a to w-b and an EUR
// withdrawal from w-c.
func threeLegs() []contract.BatchLeg {
	return []contract.BatchLeg{
		{TransferID: newTransferID(), FromWalletID: "w-ext", ToWalletID: "w-a", Amount: 1000, Currency: "USD", Kind: contract.KindDeposit},
		{TransferID: newTransferID(), FromWalletID: "w-a", ToWalletID: "w-b", Amount: 300, Currency: "USD", Kind: contract.KindTransfer},
		{TransferID: newTransferID(), FromWalletID: "w-c", ToWalletID: "w-ext", Amount: 70, Currency: "EUR", Kind: contract.KindWithdrawal},
	}
}

func batchCompleted(t *testing.T, batchID string, legs []contract.BatchLeg) contract.Envelope {
	t.Helper()
	return envelopeOf(t, contract.TypeTransferBatchCompleted, batchID, contract.TransferBatchCompleted{
		BatchID: batchID, Transfers: legs, Metadata: metadata.Metadata{"order": "o-1"}, CreatedAt: batchTime,
	})
}

// legReversal is the reversal of leg in full, as the wallet writes it.
func legReversal(leg contract.BatchLeg) contract.BatchLegReversal {
	return contract.BatchLegReversal{
		ReversalID: newTransferID(), TransferID: leg.TransferID, FromWalletID: leg.ToWalletID, ToWalletID: leg.FromWalletID,
		Amount: leg.Amount, Currency: leg.Currency,
	}
}

func batchReversed(t *testing.T, batchReversalID, batchID string, reversals ...contract.BatchLegReversal) contract.Envelope {
	t.Helper()
	return envelopeOf(t, contract.TypeTransferBatchReversed, batchReversalID, contract.TransferBatchReversed{
		BatchReversalID: batchReversalID, BatchID: batchID, Reversals: reversals, CreatedAt: batchTime.Add(time.Hour),
	})
}

// ledgerCheck is gl verify's check named name. (The tests here post without the consumer's
// inbox, so verify's inbox checks do not apply.)
func ledgerCheck(t *testing.T, b *testBundle, name string) gl.Check {
	t.Helper()
	checks, err := b.ledger.Verify(context.Background(), 0)
	require.NoError(t, err)
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("gl verify has no check %q", name)
	return gl.Check{}
}

const (
	balanceCheck = "every entry balances (debits = credits in each currency, lines in the entry's currency unless it is XXX, two lines or more)"
	batchCheck   = "every line of a batch entry carries its leg's id, each leg two lines of its kind's TransferCompleted.v2 rule in force"
	ruledCheck   = "every entry's lines are those of the posting rule in force for its event type, kind and time"
	reverseCheck = "every reversed entry's reversals total at most its amount, in its currency, and reverse no reversal"
)

func requireLedgerSound(t *testing.T, b *testBundle) {
	t.Helper()
	for _, name := range []string{balanceCheck, batchCheck, ruledCheck, reverseCheck} {
		c := ledgerCheck(t, b, name)
		require.Zero(t, c.Failures, "%s: %v", name, c.Offenders)
	}
}

// balanceOf is the account's balance in currency, in its normal-balance sign.
func balanceOf(t *testing.T, b *testBundle, code, currency string) string {
	t.Helper()
	bal, err := b.ledger.AccountBalance(context.Background(), code, currency, nil)
	require.NoError(t, err)
	return bal.Balance().String()
}

func TestABatchIsOneEntryBalancedPerCurrencyWithEveryLegsLinesTagged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	batchID, legs := newTransferID(), threeLegs()
	env := batchCompleted(t, batchID, legs)
	require.NoError(t, b.handle(t, h, env))

	entries, err := b.ledger.EntriesByTransfer(ctx, batchID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, env.ID, e.EventID)
	require.Equal(t, gl.MultiCurrency, e.Currency, "legs in two currencies: a multi-currency entry")
	require.Equal(t, contract.TypeTransferBatchCompleted, e.EventType)
	require.Equal(t, gl.KindBatch, e.Kind)
	require.Equal(t, metadata.Metadata{"order": "o-1"}, e.Metadata, "the entry carries the batch's metadata")
	require.True(t, e.Balanced())
	for i := range e.Lines { // ids are the database's
		require.NotZero(t, e.Lines[i].ID)
		e.Lines[i].ID = 0
	}
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Debit, Amount: 1000, WalletID: "w-ext", Currency: "USD", TransferID: legs[0].TransferID, LegKind: contract.KindDeposit},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 1000, WalletID: "w-a", Currency: "USD", TransferID: legs[0].TransferID, LegKind: contract.KindDeposit},
		{AccountCode: "2010", Direction: gl.Debit, Amount: 300, WalletID: "w-a", Currency: "USD", TransferID: legs[1].TransferID, LegKind: contract.KindTransfer},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 300, WalletID: "w-b", Currency: "USD", TransferID: legs[1].TransferID, LegKind: contract.KindTransfer},
		{AccountCode: "2010", Direction: gl.Debit, Amount: 70, WalletID: "w-c", Currency: "EUR", TransferID: legs[2].TransferID, LegKind: contract.KindWithdrawal},
		{AccountCode: "1010", Direction: gl.Credit, Amount: 70, WalletID: "w-ext", Currency: "EUR", TransferID: legs[2].TransferID, LegKind: contract.KindWithdrawal},
	}, e.Lines)

	byLeg, err := b.ledger.EntriesByTransfer(ctx, legs[2].TransferID)
	require.NoError(t, err)
	require.Len(t, byLeg, 1, "a leg's id finds its batch's entry")
	require.Equal(t, e.ID, byLeg[0].ID)

	acks := b.acknowledgments(t)
	require.Len(t, acks, 1, "one acknowledgment for the whole batch")
	require.Equal(t, batchID, acks[0].TransferID)
	require.Equal(t, env.ID, acks[0].SourceEventID)
	require.Equal(t, e.ID.String(), acks[0].EntryID)

	// The same event again past the inbox: acknowledged again, posted once. Another event for
	// the same batch: a conflict.
	require.NoError(t, b.handle(t, h, env))
	require.ErrorIs(t, b.handle(t, h, batchCompleted(t, batchID, legs)), contract.ErrConflict)
	entries, err = b.ledger.EntriesByTransfer(ctx, batchID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Len(t, b.acknowledgments(t), 2)

	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	require.True(t, tb.Balanced)
	require.Len(t, tb.Currencies, 2, "EUR and USD, each balanced")
	require.Equal(t, "1000", balanceOf(t, b, "1010", "USD"))
	require.Equal(t, "1000", balanceOf(t, b, "2010", "USD"))
	require.Equal(t, "-70", balanceOf(t, b, "1010", "EUR"))
	require.Equal(t, "-70", balanceOf(t, b, "2010", "EUR"))
	st, err := b.ledger.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", WalletID: "w-a", Limit: 10})
	require.NoError(t, err)
	require.Len(t, st.Lines, 2, "w-a's two USD lines of the batch")
	require.Equal(t, "700", st.Lines[1].RunningBalance.String())
	require.Equal(t, batchID, st.Lines[1].TransferID)
	requireLedgerSound(t, b)
}

func TestABatchThatCanNeverBePostedIsMalformed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	legs := threeLegs()
	unknown := threeLegs()
	unknown[0].Currency = "ZZZ"
	holdKey := threeLegs()
	holdKey[1].TransferID = gl.HoldPlacedKey("h-1")
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"a batch without legs", batchCompleted(t, newTransferID(), nil)},
		{"a batch naming a leg twice", batchCompleted(t, newTransferID(), []contract.BatchLeg{legs[0], legs[0]})},
		{"a batch with a leg in an unknown currency", batchCompleted(t, newTransferID(), unknown)},
		{"a batch with a leg in the holds' key space", batchCompleted(t, newTransferID(), holdKey)},
	}
	for _, tt := range tests {
		require.ErrorIs(t, b.handle(t, h, tt.env), contract.ErrMalformed, tt.name)
	}
	require.Empty(t, b.acknowledgments(t))
}

func TestABatchReversalReversesExactlyTheChosenLegsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	batchID, legs := newTransferID(), threeLegs()
	require.NoError(t, b.handle(t, h, batchCompleted(t, batchID, legs)))

	first, third := legReversal(legs[0]), legReversal(legs[2])
	reversalID := newTransferID()
	env := batchReversed(t, reversalID, batchID, first, third)
	require.NoError(t, b.handle(t, h, env))

	originals, err := b.ledger.EntriesByTransfer(ctx, batchID)
	require.NoError(t, err)
	reversals, err := b.ledger.EntriesByTransfer(ctx, reversalID)
	require.NoError(t, err)
	require.Len(t, reversals, 1)
	orig, r := originals[0], reversals[0]
	require.Equal(t, orig.ID, r.ReversesEntryID)
	require.Equal(t, []uuid.UUID{r.ID}, orig.ReversedBy)
	require.Equal(t, contract.TypeTransferBatchReversed, r.EventType)
	require.Equal(t, gl.MultiCurrency, r.Currency)
	require.True(t, r.Balanced())
	want := []gl.Line{
		{AccountCode: "1010", Direction: gl.Credit, Amount: 1000, WalletID: "w-ext", Currency: "USD", TransferID: first.ReversalID, LegKind: contract.KindDeposit, ReversesLineID: orig.Lines[0].ID},
		{AccountCode: "2010", Direction: gl.Debit, Amount: 1000, WalletID: "w-a", Currency: "USD", TransferID: first.ReversalID, LegKind: contract.KindDeposit, ReversesLineID: orig.Lines[1].ID},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 70, WalletID: "w-c", Currency: "EUR", TransferID: third.ReversalID, LegKind: contract.KindWithdrawal, ReversesLineID: orig.Lines[4].ID},
		{AccountCode: "1010", Direction: gl.Debit, Amount: 70, WalletID: "w-ext", Currency: "EUR", TransferID: third.ReversalID, LegKind: contract.KindWithdrawal, ReversesLineID: orig.Lines[5].ID},
	}
	for i := range r.Lines {
		r.Lines[i].ID = 0
	}
	require.Equal(t, want, r.Lines)
	for i, l := range orig.Lines {
		require.Equal(t, i != 2 && i != 3, l.Reversed, "line %d", i)
	}
	acks := b.acknowledgments(t)
	require.Len(t, acks, 2)
	require.Equal(t, reversalID, acks[1].TransferID, "the acknowledgment names the batch reversal")

	byLeg, err := b.ledger.EntriesByTransfer(ctx, third.ReversalID)
	require.NoError(t, err)
	require.Equal(t, r.ID, byLeg[0].ID, "a leg reversal's id finds its batch reversal's entry")

	second := legReversal(legs[1])
	stranger := legReversal(legs[1])
	stranger.TransferID = newTransferID()
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"a leg reversed a second time", batchReversed(t, newTransferID(), batchID, second, legReversal(legs[0]))},
		{"a transfer that is not a leg of the batch", batchReversed(t, newTransferID(), batchID, stranger)},
		{"a leg reversal of another amount", batchReversed(t, newTransferID(), batchID, func() contract.BatchLegReversal {
			r := legReversal(legs[1])
			r.Amount--
			return r
		}())},
		{"a plain reversal of a leg", transferReversed(t, newTransferID(), legs[1].TransferID, 300, "USD")},
		{"a plain reversal of the batch", transferReversed(t, newTransferID(), batchID, 300, "USD")},
		{"a batch reversal of a batch reversal", batchReversed(t, newTransferID(), reversalID, legReversal(legs[0]))},
	}
	for _, tt := range tests {
		require.ErrorIs(t, b.handle(t, h, tt.env), contract.ErrConflict, tt.name)
	}
	// Two batch reversals of the same leg in one consumer batch: the second is a conflict.
	err = b.handleBatch(t, h, []contract.Envelope{
		batchReversed(t, newTransferID(), batchID, second), batchReversed(t, newTransferID(), batchID, legReversal(legs[1])),
	})
	require.ErrorIs(t, err, contract.ErrConflict)
	require.NoError(t, b.handle(t, h, batchReversed(t, newTransferID(), batchID, second)), "the remaining leg reverses once")

	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	require.True(t, tb.Balanced)
	for _, code := range []string{"1010", "2010"} {
		require.Equal(t, "0", balanceOf(t, b, code, "USD"), code)
		require.Equal(t, "0", balanceOf(t, b, code, "EUR"), code)
	}
	requireLedgerSound(t, b)
}

// The database refuses a multi-currency entry that does not balance in each currency, and a
// single-currency entry with a line in another; gl verify finds a batch entry written around
// the ledger with a line of no leg.
func TestTheLedgerKeepsBatchEntriesBalancedPerCurrencyAndTagged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	insert := func(currency, eventType string, lines string) error {
		return database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			id := uuid.Must(uuid.NewV7())
			if _, err := tx.Exec(ctx, `INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at, event_type, kind)
				VALUES ($1, $2, $3, $4, now(), $5, 'batch')`, id, id.String(), id.String(), currency, eventType); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id, transfer_id, leg_kind)
				SELECT $1, l.account_code, l.direction, l.amount, l.currency, 'w-a', nullif(l.leg, ''), l.kind
				FROM jsonb_to_recordset($2::jsonb) AS l(account_code text, direction text, amount bigint, currency text, leg text, kind text)`, id, lines)
			return err
		})
	}
	const crossed = `[{"account_code":"2010","direction":"debit","amount":100,"currency":"USD","leg":"l1"},
		{"account_code":"2010","direction":"credit","amount":100,"currency":"EUR","leg":"l1"}]`
	require.ErrorContains(t, insert("XXX", contract.TypeTransferBatchCompleted, crossed), "does not balance", "debits in USD, credits in EUR")
	const twoCurrencies = `[{"account_code":"2010","direction":"debit","amount":100,"currency":"USD","leg":"l1"},
		{"account_code":"2010","direction":"credit","amount":100,"currency":"USD","leg":"l1"},
		{"account_code":"2010","direction":"debit","amount":5,"currency":"EUR","leg":"l2"},
		{"account_code":"2010","direction":"credit","amount":5,"currency":"EUR","leg":"l2"}]`
	require.ErrorContains(t, insert("USD", contract.TypeTransferBatchCompleted, twoCurrencies), "does not balance", "EUR lines on a USD entry")
	require.NoError(t, insert("XXX", contract.TypeTransferBatchCompleted, twoCurrencies))
	requireLedgerSound(t, b)

	const untagged = `[{"account_code":"2010","direction":"debit","amount":100,"currency":"USD","leg":"l1"},
		{"account_code":"2010","direction":"credit","amount":100,"currency":"USD","leg":""}]`
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, untagged))
	require.Equal(t, int64(1), ledgerCheck(t, b, batchCheck).Failures, "a line of no leg")
	const offRule = `[{"account_code":"1010","direction":"debit","amount":100,"currency":"USD","leg":"l1"},
		{"account_code":"1010","direction":"credit","amount":100,"currency":"USD","leg":"l1"}]`
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, offRule))
	require.Equal(t, int64(2), ledgerCheck(t, b, batchCheck).Failures, "a leg no rule makes")

	// A leg's kind names its rule: the deposit rule's lines (1010 to 2010) are sound for a
	// deposit leg, and for a leg without a kind (posted before kinds were kept), but not for a
	// leg of kind transfer, nor for a leg whose two lines name two kinds.
	deposit := func(kind1, kind2 string) string {
		return `[{"account_code":"1010","direction":"debit","amount":100,"currency":"USD","leg":"l1"` + kind1 + `},
			{"account_code":"2010","direction":"credit","amount":100,"currency":"USD","leg":"l1"` + kind2 + `}]`
	}
	const depositKind, transferKind = `,"kind":"deposit"`, `,"kind":"transfer"`
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, deposit(depositKind, depositKind)))
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, deposit("", "")))
	require.Equal(t, int64(2), ledgerCheck(t, b, batchCheck).Failures, "a deposit leg by the deposit rule, and a leg of no kind")
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, deposit(transferKind, transferKind)))
	require.Equal(t, int64(3), ledgerCheck(t, b, batchCheck).Failures, "a transfer leg by the deposit rule")
	require.NoError(t, insert("USD", contract.TypeTransferBatchCompleted, deposit(depositKind, transferKind)))
	require.Equal(t, int64(4), ledgerCheck(t, b, batchCheck).Failures, "a leg of two kinds")
}

// Through the real consumer, inbox and JetStream: a batch reversal published before its batch
// waits for it, then both post once; a malformed batch is recorded failed, malformed.
func TestTheGLConsumerPostsABatchReversalThatArrivesBeforeItsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	br := newLiveBroker(t)
	topo, keys, log, nc, publish := br.topo, br.keys, br.log, br.nc, br.publish

	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: keys.Trust},
		topo, nc, b.pool, posting.New(b.ledger, log), log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })

	batchID, reversalID, legs := newTransferID(), newTransferID(), threeLegs()
	reversal := batchReversed(t, reversalID, batchID, legReversal(legs[1]))
	malformed := batchCompleted(t, newTransferID(), nil)
	publish(reversal)
	publish(malformed)
	require.Eventually(t, func() bool { return cons.Stats().Failed == 1 }, 60*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return cons.Stats().Waited == 1 }, 60*time.Second, 20*time.Millisecond, "the reversal waits for its batch")
	require.Zero(t, cons.Stats().Processed)
	publish(batchCompleted(t, batchID, legs))
	require.Eventually(t, func() bool { s := cons.Stats(); return s.Processed == 1 && s.Released == 1 }, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	var status, reason string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT status, reason FROM inbox WHERE id = $1", "gl:"+malformed.ID).Scan(&status, &reason))
	require.Equal(t, "failed", status)
	require.Equal(t, contract.ReasonMalformed, reason)
	reversals, err := b.ledger.EntriesByTransfer(ctx, reversalID)
	require.NoError(t, err)
	require.Len(t, reversals, 1)
	require.Len(t, reversals[0].Lines, 2, "the one chosen leg's lines")
	acks := b.acknowledgments(t)
	require.Len(t, acks, 2)
	require.ElementsMatch(t, []string{batchID, reversalID}, []string{acks[0].TransferID, acks[1].TransferID})

	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failures, "gl verify agrees with the consumer: %s: %v", c.Name, c.Offenders)
	}
}

// A rule that made a batch leg is as fixed as one that made an entry: no rule of the leg's kind
// may take effect before it, and one that did cannot be withdrawn, through the ledger or plain
// SQL. A rule of another kind than the legs' may.
func TestARuleThatMadeABatchLegStays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	batchAt := time.Now().Add(3 * time.Hour).UTC()
	batchID := newTransferID()
	require.NoError(t, b.handle(t, h, envelopeOf(t, contract.TypeTransferBatchCompleted, batchID, contract.TransferBatchCompleted{
		BatchID: batchID, CreatedAt: batchAt, Transfers: []contract.BatchLeg{
			{TransferID: newTransferID(), FromWalletID: "w-ext", ToWalletID: "w-a", Amount: 5, Currency: "USD", Kind: contract.KindDeposit},
		},
	})))

	_, err := b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindDeposit, batchAt.Add(-time.Hour), "1010", "2010"))
	require.ErrorIs(t, err, postgres.ErrRuleInPast, "a deposit leg at +3h is posted: a deposit rule from +2h would reinterpret it")
	transferRule, err := b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindTransfer, batchAt.Add(-time.Hour), "2010", "2010"))
	require.NoError(t, err, "no transfer leg is posted")
	_, err = b.ledger.WithdrawRule(ctx, transferRule)
	require.NoError(t, err)

	ruleFrom := batchAt.Add(-time.Hour)
	_, err = b.pool.Exec(ctx, `INSERT INTO posting_rules (event_type, kind, effective_from, debit_account, credit_account)
		VALUES ('TransferCompleted.v2', 'deposit', $1, '1010', '2010')`, ruleFrom)
	require.NoError(t, err, "plain SQL may set a rule SetRule refuses")
	_, err = b.ledger.WithdrawRule(ctx, gl.Rule{EventType: contract.TypeTransferCompletedV2, Kind: contract.KindDeposit, EffectiveFrom: ruleFrom})
	require.ErrorIs(t, err, postgres.ErrRuleInEffect)
	require.ErrorContains(t, err, "posted an entry already")
	_, err = b.pool.Exec(ctx, `DELETE FROM posting_rules WHERE kind = 'deposit' AND effective_from = $1`, ruleFrom)
	require.ErrorContains(t, err, "covers an entry already posted", "the guard holds for every client")
}
