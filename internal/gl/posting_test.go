package gl_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

var eventTime = time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)

func envelope(t *testing.T, eventType, subject string, data any) contract.Envelope {
	t.Helper()
	body, err := json.Marshal(data)
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: eventType, Subject: subject, Time: time.Now().UTC(), DataContentType: "application/json", Data: body,
	}
}

func completed(t *testing.T, eventType, kind, transferID string, amount int64) contract.Envelope {
	t.Helper()
	return envelope(t, eventType, transferID, contract.TransferCompleted{
		TransferID: transferID, FromWalletID: "w-from", ToWalletID: "w-to",
		Amount: amount, Currency: "USD", Kind: kind, Reference: "invoice 7", CreatedAt: eventTime,
	}.AsVersion(eventType))
}

func placed(t *testing.T, holdID, wallet string, amount int64) contract.Envelope {
	t.Helper()
	return envelope(t, contract.TypeHoldPlaced, holdID, contract.HoldPlaced{
		HoldID: holdID, WalletID: wallet, Amount: amount, Currency: "USD", ExpiresAt: eventTime.Add(time.Hour), CreatedAt: eventTime,
	})
}

func voided(t *testing.T, holdID, wallet string, amount int64, currency string) contract.Envelope {
	t.Helper()
	return envelope(t, contract.TypeHoldVoided, holdID, contract.HoldVoided{
		HoldID: holdID, WalletID: wallet, Amount: amount, Currency: currency, Reason: contract.VoidExpired, CreatedAt: eventTime.Add(time.Minute),
	})
}

func reversed(t *testing.T, reversalID, transferID string, amount int64, currency string) contract.Envelope {
	t.Helper()
	return envelope(t, contract.TypeTransferReversed, reversalID, contract.TransferReversed{
		ReversalID: reversalID, TransferID: transferID, FromWalletID: "w-to", ToWalletID: "w-from",
		Amount: amount, Currency: currency, CreatedAt: eventTime.Add(time.Hour),
	})
}

func lines(amount int64, debit, credit string) []gl.Line {
	return []gl.Line{{AccountCode: debit, Direction: gl.Debit, Amount: amount, WalletID: "w-from"}, {AccountCode: credit, Direction: gl.Credit, Amount: amount, WalletID: "w-to"}}
}

func TestTransferEntryPostsByTheRuleOfItsTypeKindAndTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		eventType, kind, wantKind string
		debit, credit             string
	}{
		{contract.TypeTransferCompleted, "", contract.KindUnspecified, "1010", "2010"},
		{contract.TypeTransferCompletedV2, contract.KindDeposit, contract.KindDeposit, "1010", "2010"},
		{contract.TypeTransferCompletedV2, contract.KindTransfer, contract.KindTransfer, "2010", "2010"},
		{contract.TypeTransferCompletedV2, contract.KindWithdrawal, contract.KindWithdrawal, "2010", "1010"},
	} {
		env := completed(t, tc.eventType, tc.kind, "tr-1", 50)
		e, err := gl.TransferEntry(env, gl.DefaultRules())
		require.NoError(t, err, "%s %s", tc.eventType, tc.kind)
		require.Equal(t, lines(50, tc.debit, tc.credit), e.Lines, "%s %s", tc.eventType, tc.kind)
		require.NotEqual(t, uuid.Nil, e.ID)
		require.Equal(t, env.ID, e.EventID)
		require.Equal(t, "tr-1", e.TransferID)
		require.Equal(t, "USD", e.Currency)
		require.True(t, e.OccurredAt.Equal(eventTime))
		require.Equal(t, tc.eventType, e.EventType)
		require.Equal(t, tc.wantKind, e.Kind, "the entry records the rule's key")
		wantDescription := "transfer tr-1 from wallet w-from to wallet w-to"
		if tc.eventType == contract.TypeTransferCompletedV2 { // a v1 carries no reference
			wantDescription += ` (reference "invoice 7")`
		}
		require.Equal(t, wantDescription, e.Description)
	}

	later := gl.NewRules(append(gl.DefaultRules().All(), gl.Rule{
		EventType: contract.TypeTransferCompletedV2, Kind: contract.KindDeposit, EffectiveFrom: eventTime.Add(time.Second),
		PostingRule: gl.PostingRule{DebitAccount: "1020", CreditAccount: "2010"},
	}))
	e, err := gl.TransferEntry(completed(t, contract.TypeTransferCompletedV2, contract.KindDeposit, "tr-2", 5), later)
	require.NoError(t, err)
	require.Equal(t, lines(5, "1010", "2010"), e.Lines, "a rule effective after the transfer's time does not apply")
}

func TestTransferEntryRefusesAnEventItCanNeverPost(t *testing.T) {
	t.Parallel()
	noV2 := gl.NewRules([]gl.Rule{{EventType: contract.TypeTransferCompleted, Kind: contract.KindUnspecified, PostingRule: gl.DefaultPostingRule}})
	v9 := completed(t, contract.TypeTransferCompletedV2, contract.KindDeposit, "tr-1", 5)
	v9.Type = "TransferCompleted.v9"
	for _, tc := range []struct {
		name  string
		env   contract.Envelope
		rules gl.Rules
	}{
		{"an event no rule covers", completed(t, contract.TypeTransferCompletedV2, contract.KindDeposit, "tr-1", 5), noV2},
		{"a v2 without a kind", completed(t, contract.TypeTransferCompletedV2, contract.KindUnspecified, "tr-1", 5), gl.DefaultRules()},
		{"an unknown version", v9, gl.DefaultRules()},
		{"an amount of zero", completed(t, contract.TypeTransferCompleted, "", "tr-1", 0), gl.DefaultRules()},
		{"a transfer id in the holds' key space", completed(t, contract.TypeTransferCompleted, "", gl.HoldPlacedKey("h-1"), 5), gl.DefaultRules()},
	} {
		_, err := gl.TransferEntry(tc.env, tc.rules)
		require.ErrorIs(t, err, contract.ErrMalformed, tc.name)
	}
}

func TestAHoldsReleaseIsBuiltFromItsPlacement(t *testing.T) {
	t.Parallel()
	placement, err := gl.PlacementEntry(placed(t, "h-1", "w-1", 300), gl.DefaultHoldRules)
	require.NoError(t, err)
	require.Equal(t, gl.HoldPlacedKey("h-1"), placement.TransferID)
	require.Equal(t, "h-1", placement.HoldID)
	require.Equal(t, gl.KindHold, placement.Kind)
	require.Equal(t, gl.WalletLines(lines(300, "2010", "2020"), "w-1", "w-1"), placement.Lines, "both lines are the hold's wallet's")

	void := voided(t, "h-1", "w-1", 300, "USD")
	rel, err := gl.DecodeRelease(void)
	require.NoError(t, err)
	require.Equal(t, gl.HoldPlacedKey("h-1"), rel.PlacedKey())
	release, err := gl.ReleaseEntry(rel, placement, gl.DefaultHoldRules)
	require.NoError(t, err)
	require.Equal(t, gl.HoldReleasedKey("h-1"), release.TransferID)
	require.Equal(t, void.ID, release.EventID)
	require.Equal(t, "h-1", release.HoldID)
	require.Equal(t, gl.WalletLines(lines(300, "2020", "2010"), "w-1", "w-1"), release.Lines)
	require.True(t, release.Balanced())

	require.ErrorIs(t, gl.NoPlacement(rel), contract.ErrNotYet)
	require.Equal(t, contract.WaitHold("h-1"), contract.WaitsFor(gl.NoPlacement(rel)))
}

func TestAReleaseThatContradictsItsPlacementConflicts(t *testing.T) {
	t.Parallel()
	placement, err := gl.PlacementEntry(placed(t, "h-1", "w-1", 300), gl.DefaultHoldRules)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		env  contract.Envelope
	}{
		{"a release of another wallet", voided(t, "h-1", "w-2", 300, "USD")},
		{"a release in another currency", voided(t, "h-1", "w-1", 300, "EUR")},
		{"a release of another amount", voided(t, "h-1", "w-1", 299, "USD")},
		{"a release of another hold", voided(t, "h-2", "w-1", 300, "USD")},
	} {
		rel, err := gl.DecodeRelease(tc.env)
		require.NoError(t, err, tc.name)
		_, err = gl.ReleaseEntry(rel, placement, gl.DefaultHoldRules)
		require.ErrorIs(t, err, contract.ErrConflict, tc.name)
	}
	_, err = gl.DecodeRelease(placed(t, "h-1", "w-1", 300))
	require.ErrorIs(t, err, contract.ErrMalformed, "a placement is no release")
}

func TestAReversalSwapsItsOriginalsLinesForItsShare(t *testing.T) {
	t.Parallel()
	orig, err := gl.TransferEntry(completed(t, contract.TypeTransferCompletedV2, contract.KindDeposit, "tr-1", 1000), gl.DefaultRules())
	require.NoError(t, err)
	env := reversed(t, "rv-1", "tr-1", 400, "USD")
	data, err := gl.DecodeReversal(env)
	require.NoError(t, err)
	e, err := gl.ReversalEntry(env.ID, data, orig)
	require.NoError(t, err)
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Credit, Amount: 400, WalletID: "w-from"},
		{AccountCode: "2010", Direction: gl.Debit, Amount: 400, WalletID: "w-to"},
	}, e.Lines, "each line goes back to the wallet its original's line named")
	require.Equal(t, "rv-1", e.TransferID)
	require.Equal(t, env.ID, e.EventID)
	require.Equal(t, orig.ID, e.ReversesEntryID)
	require.Equal(t, contract.TypeTransferReversed, e.EventType, "a reversal carries its own event's type")
	require.Equal(t, orig.Kind, e.Kind, "and its original's kind")
	require.True(t, e.Balanced())

	require.ErrorIs(t, gl.NoOriginal(env.ID, data), contract.ErrNotYet)
	require.Equal(t, contract.WaitTransfer("tr-1"), contract.WaitsFor(gl.NoOriginal(env.ID, data)))
	_, err = gl.DecodeReversal(reversed(t, gl.HoldReleasedKey("h-1"), "tr-1", 400, "USD"))
	require.ErrorIs(t, err, contract.ErrMalformed, "a reversal id in the holds' key space")
}

func TestAReversalThatDoesNotFitItsOriginalConflicts(t *testing.T) {
	t.Parallel()
	orig, err := gl.TransferEntry(completed(t, contract.TypeTransferCompleted, "", "tr-1", 100), gl.DefaultRules())
	require.NoError(t, err)
	uneven := orig
	uneven.Lines = []gl.Line{
		{AccountCode: "1010", Direction: gl.Debit, Amount: 3},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 2},
		{AccountCode: "2020", Direction: gl.Credit, Amount: 1},
	}
	hold, err := gl.PlacementEntry(placed(t, "h-1", "w-1", 100), gl.DefaultHoldRules)
	require.NoError(t, err)
	reversal := orig
	reversal.ReversesEntryID = uuid.New()
	for _, tc := range []struct {
		name string
		data contract.TransferReversed
		orig gl.Entry
	}{
		{"a reversal in another currency", contract.TransferReversed{ReversalID: "rv", TransferID: "tr-1", Amount: 10, Currency: "EUR"}, orig},
		{"a reversal beyond the original", contract.TransferReversed{ReversalID: "rv", TransferID: "tr-1", Amount: 101, Currency: "USD"}, orig},
		{"a share that does not divide a line exactly", contract.TransferReversed{ReversalID: "rv", TransferID: "tr-1", Amount: 1, Currency: "USD"}, uneven},
		{"a reversal of a hold's movement", contract.TransferReversed{ReversalID: "rv", TransferID: hold.TransferID, Amount: 10, Currency: "USD"}, hold},
		{"a reversal of a reversal", contract.TransferReversed{ReversalID: "rv", TransferID: "tr-1", Amount: 10, Currency: "USD"}, reversal},
	} {
		_, err := gl.ReversalEntry("ev", tc.data, tc.orig)
		require.ErrorIs(t, err, contract.ErrConflict, tc.name)
	}
}

func TestCheckPostingSaysWhoPostedAMovementAndRefusesOtherFiguresAndOtherEvents(t *testing.T) {
	t.Parallel()
	e, err := gl.TransferEntry(completed(t, contract.TypeTransferCompleted, "", "tr-1", 500), gl.DefaultRules())
	require.NoError(t, err)
	stored := e
	stored.Lines = nil
	posting := gl.Posting{Entry: stored, Amount: gl.SumOf(500)}

	as, err := gl.CheckPosting(e, gl.Posting{Entry: stored, Amount: gl.SumOf(500), Created: true})
	require.NoError(t, err)
	require.Equal(t, gl.PostedNew, as)
	as, err = gl.CheckPosting(e, posting)
	require.NoError(t, err)
	require.Equal(t, gl.PostedBefore, as, "the same event posted before")
	other := e
	other.EventID = "another event"
	_, err = gl.CheckPosting(other, posting)
	require.ErrorIs(t, err, contract.ErrConflict, "another event with the same figures")

	otherWallet := stored
	otherWallet.Description = "transfer tr-1 from wallet w-from to wallet w-thief"
	otherCurrency := stored
	otherCurrency.Currency = "EUR"
	for _, tc := range []struct {
		name    string
		posting gl.Posting
	}{
		{"another amount", gl.Posting{Entry: stored, Amount: gl.SumOf(5_000_000)}},
		{"another currency", gl.Posting{Entry: otherCurrency, Amount: gl.SumOf(500)}},
		{"other wallets", gl.Posting{Entry: otherWallet, Amount: gl.SumOf(500)}},
	} {
		_, err := gl.CheckPosting(e, tc.posting)
		require.ErrorIs(t, err, contract.ErrConflict, tc.name)
	}
}

func TestSatisfiesNamesWhatAPostingLetsWait(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{contract.WaitTransfer("tr-1")}, gl.Satisfies(completed(t, contract.TypeTransferCompleted, "", "tr-1", 5)))
	require.Equal(t, []string{contract.WaitTransfer("tr-2")}, gl.Satisfies(completed(t, contract.TypeTransferCompletedV2, contract.KindDeposit, "tr-2", 5)))
	require.Equal(t, []string{contract.WaitHold("h-1")}, gl.Satisfies(placed(t, "h-1", "w-1", 5)))
	require.Empty(t, gl.Satisfies(voided(t, "h-1", "w-1", 5, "USD")), "a release lets nothing go on")
	require.Empty(t, gl.Satisfies(reversed(t, "rv-1", "tr-1", 5, "USD")))
	unreadable := completed(t, contract.TypeTransferCompleted, "", "tr-1", 5)
	unreadable.Data = json.RawMessage(`[1]`)
	require.Empty(t, gl.Satisfies(unreadable), "an event it cannot read satisfies nothing")
}
