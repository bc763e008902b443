package signing_test

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/config"
	"walletgl/internal/events/signing"
)

// parseSettings reads the signing settings from env and the command line args.
func parseSettings(env map[string]string, args ...string) (signing.Settings, error) {
	var c signing.Settings
	s := config.NewSet("test", func(k string) string { return env[k] }, io.Discard)
	c.Bind(s)
	return c, s.Parse(args)
}

// Running unsigned lowers the guard: only the exact word true does it, and any other value stops
// the start with the setting's name, instead of being read as true or as false.
func TestInsecureUnsignedAcceptsTrueOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  bool
	}{{"", false}, {"false", false}, {"true", true}} {
		c, err := parseSettings(map[string]string{"EVENTS_INSECURE_UNSIGNED": tc.value})
		require.NoError(t, err, "%q", tc.value)
		require.Equal(t, tc.want, c.InsecureUnsigned, "%q", tc.value)
	}
	for _, value := range []string{"1", "yes", "TRUE", "True", "t", "on", "0", " true"} {
		_, err := parseSettings(map[string]string{"EVENTS_INSECURE_UNSIGNED": value})
		require.ErrorContains(t, err, "EVENTS_INSECURE_UNSIGNED", "%q", value)
	}

	c, err := parseSettings(nil, "-insecure-unsigned")
	require.NoError(t, err)
	require.True(t, c.InsecureUnsigned, "the flag alone")
	c, err = parseSettings(map[string]string{"EVENTS_INSECURE_UNSIGNED": "true"}, "-insecure-unsigned=false")
	require.NoError(t, err)
	require.False(t, c.InsecureUnsigned, "the flag overrides the environment")
	_, err = parseSettings(nil, "-insecure-unsigned=1")
	require.ErrorContains(t, err, "insecure-unsigned")
}
