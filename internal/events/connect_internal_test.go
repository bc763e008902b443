package events

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A password in any URL of the list never reaches an error or a log line.
func TestRedactURLHidesEveryPassword(t *testing.T) {
	t.Parallel()
	got := redactURL("nats://gl:s3cret@n1:4222,nats://wallet:other@n2:4222,nats://n3:4222")
	require.NotContains(t, got, "s3cret")
	require.NotContains(t, got, "other")
	require.Contains(t, got, "n3:4222")
	require.NotContains(t, redactURL("nats://gl:s3%zz@n1:4222"), "s3")
}
