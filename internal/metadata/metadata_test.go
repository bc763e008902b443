package metadata_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/metadata"
)

func TestKeyOfParameter(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"metadata[order_id]": "order_id", "metadata[a.b-c]": "a.b-c", "metadata[]": ""} {
		key, ok := metadata.KeyOfParameter(name)
		require.True(t, ok, name)
		require.Equal(t, want, key, name)
	}
	for _, name := range []string{"metadata", "metadata[a][b]", "metadata[a", "meta[a]", "wallet_id"} {
		_, ok := metadata.KeyOfParameter(name)
		require.False(t, ok, name)
	}
}

func TestFromQueryReadsEveryPairAndChecksThem(t *testing.T) {
	t.Parallel()
	m, err := metadata.FromQuery(url.Values{"metadata[order_id]": {"123"}, "metadata[shop]": {"eu"}, "limit": {"5"}})
	require.NoError(t, err)
	require.Equal(t, metadata.Metadata{"order_id": "123", "shop": "eu"}, m)
	require.Equal(t, `{"order_id":"123","shop":"eu"}`, string(m.JSON()))

	none, err := metadata.FromQuery(url.Values{"limit": {"5"}})
	require.NoError(t, err)
	require.Empty(t, none)
	require.Equal(t, "{}", string(none.JSON()))

	for _, q := range []url.Values{
		{"metadata[order_id]": {""}},
		{"metadata[]": {"1"}},
		{"metadata[order id]": {"1"}},
		{"metadata[k]": {strings.Repeat("v", metadata.MaxValueLength+1)}},
	} {
		_, err := metadata.FromQuery(q)
		require.ErrorIs(t, err, metadata.ErrInvalid, "%v", q)
	}
}

func TestFromJSONNamesTheFault(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", "null", "{}"} {
		m, err := metadata.FromJSON([]byte(raw))
		require.NoError(t, err, raw)
		require.Empty(t, m, raw)
	}
	for raw, detail := range map[string]string{
		`"x"`:                  "JSON object",
		`{"k":null}`:           `key "k" must be a string`,
		`{"k":{"a":"b"}}`:      `key "k" must be a string`,
		`{"k":"a\u0007b"}`:     "control character",
		`{"k":"\u00e9\u00e9"}`: "", // two characters, accepted
	} {
		_, err := metadata.FromJSON([]byte(raw))
		if detail == "" {
			require.NoError(t, err, raw)
			continue
		}
		require.ErrorIs(t, err, metadata.ErrInvalid, raw)
		require.ErrorContains(t, err, detail, raw)
	}
}
