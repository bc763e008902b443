package posting_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
)

func rule(eventType, kind string, from time.Time, debit, credit string) gl.Rule {
	return gl.Rule{EventType: eventType, Kind: kind, EffectiveFrom: from, PostingRule: gl.PostingRule{DebitAccount: debit, CreditAccount: credit}}
}

// transferEvent is a TransferCompleted of eventType (v1 or v2, the v2 of kind) at created.
func transferEvent(t *testing.T, eventType, kind, transferID string, amount int64, created time.Time) contract.Envelope {
	t.Helper()
	data, err := json.Marshal(contract.TransferCompleted{
		TransferID: transferID, FromWalletID: "w-from", ToWalletID: "w-to",
		Amount: amount, Currency: "USD", Kind: kind, Reference: "invoice 7", CreatedAt: created,
	}.AsVersion(eventType))
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: eventType, Subject: transferID, Time: time.Now().UTC(),
		DataContentType: "application/json", Data: data,
	}
}

func linesOf(t *testing.T, b *testBundle, transferID string) gl.Entry {
	t.Helper()
	entries, err := b.ledger.EntriesByTransfer(context.Background(), transferID)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0]
}

func twoLines(amount int64, debit, credit string) []gl.Line {
	return []gl.Line{{AccountCode: debit, Direction: gl.Debit, Amount: amount, WalletID: "w-from"}, {AccountCode: credit, Direction: gl.Credit, Amount: amount, WalletID: "w-to"}}
}

func TestHandlerPostsByKindAndVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		eventType, kind string
		debit, credit   string
	}{
		{contract.TypeTransferCompleted, "", "1010", "2010"}, // v1: upcast to kind unspecified
		{contract.TypeTransferCompletedV2, contract.KindDeposit, "1010", "2010"},
		{contract.TypeTransferCompletedV2, contract.KindTransfer, "2010", "2010"},
		{contract.TypeTransferCompletedV2, contract.KindWithdrawal, "2010", "1010"},
	} {
		id := newTransferID()
		require.NoError(t, b.handle(t, h, transferEvent(t, tc.eventType, tc.kind, id, 50, at)))
		e := linesOf(t, b, id)
		require.Equal(t, twoLines(50, tc.debit, tc.credit), e.Lines, "%s %s", tc.eventType, tc.kind)
		require.Equal(t, tc.eventType, e.EventType)
		wantKind := tc.kind
		if wantKind == "" {
			wantKind = contract.KindUnspecified
		}
		require.Equal(t, wantKind, e.Kind, "the entry records the rule's key")
	}
	// A v2 must say a kind it has; an unknown version is never posted.
	bad := transferEvent(t, contract.TypeTransferCompletedV2, contract.KindUnspecified, newTransferID(), 5, at)
	require.ErrorIs(t, b.handle(t, h, bad), contract.ErrMalformed)
	v9 := transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, newTransferID(), 5, at)
	v9.Type = "TransferCompleted.v9"
	require.ErrorIs(t, b.handle(t, h, v9), contract.ErrMalformed)
	c := ruleCheck(t, b)
	require.True(t, c.Passed(), "%v", c.Offenders)
	require.Equal(t, int64(4), c.Checked)
}

func TestRuleChangeAffectsOnlyLaterEventsAndNeverThePast(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	_, err := b.ledger.AddAccount(ctx, gl.Account{Code: "1020", Name: "Cash at the second bank", Type: gl.Asset, NormalBalance: gl.Debit})
	require.NoError(t, err)

	before := newTransferID()
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, before, 10, time.Now().Add(-time.Minute))))

	// Refused: the past, an unknown account, an unknown kind, an effective time not after an
	// entry already posted under the key.
	_, err = b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Now().Add(-time.Hour), "1020", "2010"))
	require.ErrorIs(t, err, postgres.ErrRuleInPast)
	_, err = b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "9999", "2010"))
	require.ErrorIs(t, err, gl.ErrAccountNotFound)
	_, err = b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, "gift", time.Time{}, "1020", "2010"))
	require.ErrorIs(t, err, gl.ErrInvalidRule)
	future := newTransferID()
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindWithdrawal, future, 10, time.Now().Add(2*time.Hour))))
	_, err = b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindWithdrawal, time.Now().Add(time.Hour), "2010", "1020"))
	require.ErrorIs(t, err, postgres.ErrRuleInPast, "a withdrawal at +2h is posted: a rule from +1h would reinterpret it")

	set, err := b.ledger.SetRule(ctx, rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1020", "2010"))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), set.EffectiveFrom, time.Minute, "default: now")

	late := newTransferID() // made before the change, delivered after it
	after := newTransferID()
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, late, 20, set.EffectiveFrom.Add(-time.Millisecond))))
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, after, 30, set.EffectiveFrom.Add(time.Second))))

	require.Equal(t, twoLines(10, "1010", "2010"), linesOf(t, b, before).Lines, "posted entries are never rewritten")
	require.Equal(t, twoLines(20, "1010", "2010"), linesOf(t, b, late).Lines, "by the event's time, not the posting's")
	require.Equal(t, twoLines(30, "1020", "2010"), linesOf(t, b, after).Lines)

	rules, err := b.ledger.Rules(ctx)
	require.NoError(t, err)
	require.Len(t, rules.All(), len(gl.DefaultRules().All())+1, "a change adds a row")
	c := ruleCheck(t, b)
	require.True(t, c.Passed(), "%v", c.Offenders)
	// Reconcile checks each entry against the rule of its own time.
	var transfers []gl.SourceTransfer
	for id, amount := range map[string]int64{before: 10, late: 20, after: 30, future: 10} {
		transfers = append(transfers, gl.SourceTransfer{ID: id, Amount: amount, Currency: "USD"})
	}
	page, err := b.ledger.Entries(ctx, gl.EntryQuery{Limit: 100})
	require.NoError(t, err)
	rec := gl.Reconcile(rules, transfers, page.Entries)
	require.True(t, rec.Agree(), "%+v", rec.Differences)
	// Under the old rules alone, the entry posted by the new one is a mismatch.
	rec = gl.Reconcile(gl.DefaultRules(), transfers, page.Entries)
	require.Len(t, rec.Differences, 1)
	require.Equal(t, after, rec.Differences[0].TransferID)
}

// ruleCheck is gl verify's check of every entry against its posting rule. (The tests here post
// without the consumer's inbox, so verify's inbox checks do not apply.)
func ruleCheck(t *testing.T, b *testBundle) gl.Check {
	t.Helper()
	checks, err := b.ledger.Verify(context.Background(), 0)
	require.NoError(t, err)
	for _, c := range checks {
		if c.Name == "every entry's lines are those of the posting rule in force for its event type, kind and time" {
			return c
		}
	}
	t.Fatal("gl verify has no check of the posting rules")
	return gl.Check{}
}
