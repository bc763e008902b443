package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/cli/clitest"
)

func TestWriteVerification(t *testing.T) {
	t.Parallel()
	checks := []cli.Check{
		cli.NewCheck("every entry balances", "entries", 7, 0, nil),
		cli.NewCheck("no balance below its floor", "", 3, 4, []string{"bob", "carol"}),
	}
	var out bytes.Buffer
	env := cli.Env{Stdout: &out, Name: "svc verify"}

	err := cli.WriteVerification(env, "ledger", checks, false)
	require.EqualError(t, err, "verify: 1 of 2 checks failed")
	require.Equal(t, `svc verify: database ledger
  PASS  every entry balances: 7 entries checked, 0 failing
  FAIL  no balance below its floor: 3 checked, 4 failing
        bob, carol (and 2 more)
verdict: FAIL, 1 of 2 checks failed
`, out.String())

	out.Reset()
	require.Error(t, cli.WriteVerification(env, "ledger", checks, true))
	require.JSONEq(t, `{"database": "ledger", "ok": false, "checks": [
		{"name": "every entry balances", "ok": true, "checked": 7, "failed": 0, "sample": [], "detail": "7 entries checked, 0 failing"},
		{"name": "no balance below its floor", "ok": false, "checked": 3, "failed": 4, "sample": ["bob", "carol"], "detail": "3 checked, 4 failing"}
	]}`, out.String())
	clitest.Verification(t, out.String())

	out.Reset()
	require.NoError(t, cli.WriteVerification(env, "ledger", checks[:1], false))
	require.Contains(t, out.String(), "verdict: PASS, all 1 checks hold\n")
}
