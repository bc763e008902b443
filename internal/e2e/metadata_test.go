package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A transfer's and a hold's metadata travel through the real binaries: the wallet stores
// them, TransferCompleted.v2 and HoldPlaced.v1 carry them, the GL stores them on the transfer's
// and the hold's placement entry (and the capture's transfer carries its hold's), and the same
// metadata filter lists the same movements in both services.
func TestMetadataReachesTheGLAndFiltersAlikeInBothServices(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ctx := context.Background()

	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bank", "USD", true))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "alice", "USD", false))
	require.NoError(t, s.walletAPI.CreateWallet(ctx, "bob", "USD", false))
	moves := []struct {
		from, to string
		metadata map[string]string
	}{
		{"bank", "alice", map[string]string{"order_id": "123", "shop": "eu"}}, // a deposit
		{"alice", "bob", map[string]string{"order_id": "123", "shop": "us"}},  // a transfer
		{"alice", "bob", map[string]string{"order_id": "124", "shop": "eu"}},
		{"alice", "bank", map[string]string{"order_id": "123", "shop": "eu", "channel": "web"}}, // a withdrawal
		{"alice", "bob", nil},
	}
	ids := make([]string, len(moves))
	for i, m := range moves {
		body := map[string]any{"from_wallet_id": m.from, "to_wallet_id": m.to, "amount": 100, "currency": "USD"}
		if i == 0 {
			body["amount"] = 1000 // the deposit funds the rest
		}
		if m.metadata != nil {
			body["metadata"] = m.metadata
		}
		resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/transfers", body, map[string]string{"Idempotency-Key": fmt.Sprintf("meta-%d", i)})
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var tr struct {
			ID string `json:"id"`
		}
		require.NoError(t, resp.Decode(&tr))
		ids[i] = tr.ID
	}
	resp, err := s.walletAPI.Do(ctx, http.MethodPost, "/v1/holds",
		map[string]any{"wallet_id": "alice", "amount": 50, "metadata": map[string]string{"order_id": "123", "shop": "eu", "channel": "app"}},
		map[string]string{"Idempotency-Key": "meta-hold"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var hold struct {
		ID string `json:"id"`
	}
	require.NoError(t, resp.Decode(&hold))
	resp, err = s.walletAPI.Do(ctx, http.MethodPost, "/v1/holds/"+hold.ID+"/capture", map[string]any{"to_wallet_id": "bob", "amount": 20},
		map[string]string{"Idempotency-Key": "meta-capture"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var captured struct {
		CaptureTransferID string `json:"capture_transfer_id"`
	}
	require.NoError(t, resp.Decode(&captured))
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, s.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status <> 'acknowledged'").Scan(&open))
		return open == 0
	}, 60*time.Second, 100*time.Millisecond, "every transfer is posted and acknowledged")

	type entryJSON struct {
		TransferID string            `json:"transfer_id"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
	}
	for i, m := range moves {
		resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+ids[i], nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Entries []entryJSON `json:"entries"`
		}
		require.NoError(t, resp.Decode(&out))
		require.Len(t, out.Entries, 1)
		want := m.metadata
		if want == nil {
			want = map[string]string{}
		}
		require.Equal(t, want, out.Entries[0].Metadata, "the entry of transfer %d (%s)", i, out.Entries[0].Kind)
	}

	for key, want := range map[string]map[string]string{
		"hold:" + hold.ID + ":placed":   {"order_id": "123", "shop": "eu", "channel": "app"},
		"hold:" + hold.ID + ":released": {},
		captured.CaptureTransferID:      {"order_id": "123", "shop": "eu", "channel": "app"},
	} {
		resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?transfer_id="+key, nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Entries []entryJSON `json:"entries"`
		}
		require.NoError(t, resp.Decode(&out))
		require.Len(t, out.Entries, 1, key)
		require.Equal(t, want, out.Entries[0].Metadata, "the entry of %s", key)
	}

	// The wallet's answer to a filter, in the GL's terms: the transfers it lists, and the
	// placement entry of each hold it lists.
	walletList := func(filter url.Values) []string {
		resp, err := s.walletAPI.Do(ctx, http.MethodGet, "/v1/holds?"+filter.Encode(), nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var holds struct {
			Holds []struct {
				ID string `json:"id"`
			} `json:"holds"`
		}
		require.NoError(t, resp.Decode(&holds))
		var got []string
		for _, h := range holds.Holds {
			got = append(got, "hold:"+h.ID+":placed")
		}
		resp, err = s.walletAPI.Do(ctx, http.MethodGet, "/v1/transfers?"+filter.Encode(), nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Transfers []struct {
				ID string `json:"id"`
			} `json:"transfers"`
		}
		require.NoError(t, resp.Decode(&out))
		for _, tr := range out.Transfers {
			got = append(got, tr.ID)
		}
		return got
	}
	glList := func(filter url.Values) []string {
		resp, err := s.glAPI.Do(ctx, http.MethodGet, "/v1/entries?"+filter.Encode(), nil, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var out struct {
			Entries []entryJSON `json:"entries"`
		}
		require.NoError(t, resp.Decode(&out))
		var got []string
		for _, e := range out.Entries {
			got = append(got, e.TransferID)
		}
		return got
	}
	heldAndCaptured := []string{"hold:" + hold.ID + ":placed", captured.CaptureTransferID}
	for _, tt := range []struct {
		name     string
		filter   url.Values
		want     []int // indexes of moves
		withHold bool  // and the hold's placement and capture
	}{
		{"one pair", url.Values{"metadata[order_id]": {"123"}}, []int{0, 1, 3}, true},
		{"two pairs", url.Values{"metadata[order_id]": {"123"}, "metadata[shop]": {"eu"}}, []int{0, 3}, true},
		{"three pairs", url.Values{"metadata[order_id]": {"123"}, "metadata[shop]": {"eu"}, "metadata[channel]": {"web"}}, []int{3}, false},
		{"the hold's pair", url.Values{"metadata[channel]": {"app"}}, nil, true},
		{"a pair nobody gave", url.Values{"metadata[order_id]": {"999"}}, nil, false},
	} {
		var want []string
		for _, i := range tt.want {
			want = append(want, ids[i])
		}
		if tt.withHold {
			want = append(want, heldAndCaptured...)
		}
		require.ElementsMatch(t, want, walletList(tt.filter), "the wallet: %s", tt.name)
		require.ElementsMatch(t, want, glList(tt.filter), "the GL: %s", tt.name)
	}
}
