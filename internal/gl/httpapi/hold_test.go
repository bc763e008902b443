package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

// A hold's entry is read by its event and shows its hold_id; account 2020 is in the trial
// balance like any account.
func TestAHoldsEntryShowsItsHoldID(t *testing.T) {
	t.Parallel()
	holdID := "hold-" + uuid.NewString()
	placed := gl.Entry{
		ID: uuid.Must(uuid.NewV7()), EventID: uuid.Must(uuid.NewV7()).String(), TransferID: gl.HoldPlacedKey(holdID),
		HoldID: holdID, Currency: "USD", OccurredAt: time.Now().UTC(),
		Lines: []gl.Line{
			{AccountCode: "2010", Direction: gl.Debit, Amount: 400, WalletID: "w-1"},
			{AccountCode: "2020", Direction: gl.Credit, Amount: 400, WalletID: "w-1"},
		},
	}
	b := setup(t, entry(uuid.NewString(), "USD", 1000), placed)

	var body struct {
		Entries []struct {
			EventID    string `json:"event_id"`
			TransferID string `json:"transfer_id"`
			HoldID     string `json:"hold_id"`
		} `json:"entries"`
	}
	status, _ := b.get(t, "/v1/entries?event_id="+placed.EventID, &body)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, body.Entries, 1)
	require.Equal(t, holdID, body.Entries[0].HoldID)
	require.Equal(t, gl.HoldPlacedKey(holdID), body.Entries[0].TransferID)

	// By its key, as the API shows it in transfer_id.
	status, _ = b.get(t, "/v1/entries?transfer_id="+gl.HoldPlacedKey(holdID), &body)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, body.Entries, 1)
	require.Equal(t, placed.EventID, body.Entries[0].EventID)
	b.requireInvalid(t, "/v1/entries?transfer_id=hold:"+holdID+":other", http.StatusBadRequest, "invalid-transfer-id")

	var tb struct {
		Accounts []struct {
			AccountCode string `json:"account_code"`
			Currency    string `json:"currency"`
		} `json:"accounts"`
	}
	status, _ = b.get(t, "/v1/trial-balance", &tb)
	require.Equal(t, http.StatusOK, status)
	var codes []string
	for _, a := range tb.Accounts {
		codes = append(codes, a.AccountCode)
	}
	require.Contains(t, codes, "2020")
}
