package serve_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/config"
	"walletgl/internal/events"
	"walletgl/internal/serve"
)

// eventSettings parses the event settings from env over their defaults.
func eventSettings(t *testing.T, env map[string]string) serve.Events {
	t.Helper()
	var c serve.Events
	s := config.NewSet("test", func(k string) string { return env[k] }, io.Discard)
	c.Bind(s)
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

func TestEachPartOfTheEventSettingsIsValidated(t *testing.T) {
	t.Parallel()
	err := eventSettings(t, map[string]string{
		"NATS_PASSWORD": "p", "EVENTS_STREAM_MAX_AGE": "1m", "EVENTS_INBOX_RETENTION": "1h",
		"EVENTS_MARK_DELAY": "20s", "EVENTS_CONSUMER_WORKERS": "0", "EVENTS_BATCH_SIZE": "0",
	}).Validate()
	for _, want := range []string{
		"NATS_PASSWORD needs NATS_USER",
		"EVENTS_STREAM_MAX_AGE (1m0s) must not be shorter than EVENTS_DUPLICATE_WINDOW (2m0s)",
		"EVENTS_MARK_DELAY must be between 0 and half of EVENTS_LEASE and EVENTS_ACK_TIMEOUT (15s), got 20s",
		"EVENTS_CONSUMER_WORKERS must be at least 1, got 0",
		"EVENTS_BATCH_SIZE must be at least 1, got 0",
		"EVENTS_INBOX_RETENTION (1h0m0s) must be at least 168h0m0s",
	} {
		require.ErrorContains(t, err, want)
	}
}

func TestTheConsumerTakesTheRelaysBatchSizeAndItsSpecFromTheTopology(t *testing.T) {
	t.Parallel()
	ev := eventSettings(t, map[string]string{"EVENTS_BATCH_SIZE": "7", "EVENTS_ACK_WAIT": "9s", "EVENTS_CONSUMER_WORKERS": "3"})
	c, err := ev.ConsumerFor(events.ConsumerGL, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 7, c.BatchSize)
	require.Equal(t, 3, c.Workers)
	require.Equal(t, 9*time.Second, c.AckWait)
	require.Equal(t, events.ConsumerGL, c.Name)
	r := ev.RelayFor("wallet", "", nil, nil)
	require.Equal(t, 7, r.BatchSize)
	require.Equal(t, "wallet", r.Source)
}
