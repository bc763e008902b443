package contract_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
)

// FuzzDecodeEnvelope feeds the consumer's envelope decoder any message body. It must never
// panic; a refusal is always permanent (the message is recorded failed, never redelivered for
// ever); an accepted envelope has what the inbox needs (spec version, id, type, data), and a
// TransferCompleted payload either validates or is refused as permanent too.
func FuzzDecodeEnvelope(f *testing.F) {
	data, _ := json.Marshal(contract.TransferCompleted{TransferID: "t", FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "USD", CreatedAt: time.Unix(0, 0)})
	good, _ := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: "e", Source: "wallet", Type: contract.TypeTransferCompleted, Data: data})
	for _, seed := range [][]byte{good, []byte(`{}`), []byte(`{"specversion":"1.0","id":"e","type":"X","data":null}`),
		[]byte(`{"specversion":"0.3"}`), []byte(`not json`), nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := contract.DecodeEnvelope(body)
		if err != nil {
			require.True(t, errors.Is(err, contract.ErrMalformed), "a refusal is permanent: %v", err)
			return
		}
		require.Equal(t, "1.0", env.SpecVersion)
		require.NotEmpty(t, env.ID)
		require.NotEmpty(t, env.Type)
		require.NotEmpty(t, env.Data)
		var tc contract.TransferCompleted
		if err := env.DecodeData(&tc); err != nil {
			require.True(t, errors.Is(err, contract.ErrMalformed))
			return
		}
		if err := tc.Validate(); err != nil {
			require.True(t, errors.Is(err, contract.ErrMalformed))
		}
	})
}
