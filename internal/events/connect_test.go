package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
)

// A password or token in any URL of the list never reaches an error or a log line.
func TestRedactURLHidesEveryPassword(t *testing.T) {
	t.Parallel()
	got := events.RedactURL("nats://gl:s3cret@n1:4222,nats://wallet:other@n2:4222,nats://n3:4222")
	require.NotContains(t, got, "s3cret")
	require.NotContains(t, got, "other")
	require.Contains(t, got, "n3:4222")
	require.NotContains(t, events.RedactURL("nats://gl:s3%zz@n1:4222"), "s3")
	require.Equal(t, "nats://xxxxx@n1:4222", events.RedactURL("nats://t0ken@n1:4222"), "a token in the user part")
}
