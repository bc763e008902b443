package config_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/config"
)

// eventSettings parses the event settings from env over their defaults.
func eventSettings(t *testing.T, env map[string]string) config.Events {
	t.Helper()
	var c config.Events
	s := config.NewSet("test", func(k string) string { return env[k] }, io.Discard)
	config.BindEvents(s, &c)
	require.NoError(t, s.Parse(nil))
	return c
}

func TestTheInboxRetentionMustOutlastTheStreamAndTheOutbox(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		// refused names the settings the error must name; empty: valid
		refused []string
	}{
		{name: "the defaults go together"},
		{name: "a retention as long as the stream's max age and duplicate window is enough",
			env: map[string]string{"EVENTS_INBOX_RETENTION": "168h2m"}},
		{name: "a retention shorter than the stream's max age and duplicate window is refused",
			env:     map[string]string{"EVENTS_INBOX_RETENTION": "168h"},
			refused: []string{"EVENTS_INBOX_RETENTION (168h0m0s) must be at least 168h2m0s", "EVENTS_STREAM_MAX_AGE + EVENTS_DUPLICATE_WINDOW"}},
		{name: "a stream kept longer needs a longer retention",
			env:     map[string]string{"EVENTS_STREAM_MAX_AGE": "720h"},
			refused: []string{"EVENTS_INBOX_RETENTION (192h0m0s) must be at least 720h2m0s"}},
		{name: "a retention shorter than the outbox's is refused",
			env:     map[string]string{"EVENTS_RETENTION": "240h"},
			refused: []string{"EVENTS_INBOX_RETENTION (192h0m0s) must be at least 240h0m0s", "EVENTS_RETENTION (240h0m0s)"}},
		{name: "a retention that is not positive is refused",
			env:     map[string]string{"EVENTS_INBOX_RETENTION": "0s"},
			refused: []string{"EVENTS_INBOX_RETENTION must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := eventSettings(t, tc.env).Validate()
			if len(tc.refused) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, want := range tc.refused {
				require.ErrorContains(t, err, want)
			}
		})
	}
}
