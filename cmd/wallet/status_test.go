package main

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/cli/clitest"
	"walletgl/internal/events/contract"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	b := setup(t) // three transfers, each with its pending outbox row
	b.setStatus(t, 0, "dead_letter")
	failed := b.setStatus(t, 1, "failed") // the newest error
	maps.Copy(b.env, clitest.Broker(t, map[string]int{contract.SourceWallet: 2}))

	out, _, err := b.run(t, "status")
	require.NoError(t, err)
	require.Regexp(t, `^wallet status: database \S+, broker nats://`, out)
	require.Regexp(t, `(?m)^outbox\s+pending 1, dispatching 0, dispatched 0, acknowledged 0, failed 1, dead_letter 1$`, out)
	require.Regexp(t, `(?m)^  oldest pending\s+\d+(ms|s) \(created `, out)
	require.Regexp(t, `(?m)^  last error\s+failed `+failed.String()+` at \S+: nats: no responders$`, out)
	require.Regexp(t, `(?m)^consumer gl of t\w+_WALLET_EVENTS \(this outbox\)\s+2 pending, 0 unacknowledged, 0 redelivered$`, out)
	require.Regexp(t, `(?m)^consumer wallet of t\w+_GL_EVENTS \(this inbox\)\s+0 pending, 0 unacknowledged, 0 redelivered$`, out)
	require.Regexp(t, `(?m)^inbox\s+processing 0, waiting 0, processed 0, failed 0, duplicate 0, resolved 0; duplicates absorbed 0$`, out)
	require.Regexp(t, `(?m)^  last failure\s+none$`, out)
	require.Contains(t, out, "attention:\n  1 dead_letter outbox rows wait for an operator: wallet outbox list --status dead_letter\n")

	out, _, err = b.run(t, "status", "--json")
	require.NoError(t, err)
	var st cli.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, "wallet", st.Service)
	require.Equal(t, map[string]int64{"pending": 1, "dispatching": 0, "dispatched": 0, "acknowledged": 0, "failed": 1, "dead_letter": 1}, st.Outbox.Counts)
	require.Equal(t, failed, st.OutboxLastError.ID)
	require.Nil(t, st.InboxLastFailure)
	require.Equal(t, []cli.ConsumerStatus{
		{Name: "gl", Stream: b.env["EVENTS_NAMESPACE"] + "_WALLET_EVENTS", Side: "outbox", Exists: true, Pending: 2},
		{Name: "wallet", Stream: b.env["EVENTS_NAMESPACE"] + "_GL_EVENTS", Side: "inbox", Exists: true},
	}, st.Broker.Consumers)
	require.Len(t, st.Attention, 1)

	t.Run("consumers the broker does not have yet are named", func(t *testing.T) {
		fresh := maps.Clone(b.env)
		fresh["EVENTS_NAMESPACE"] = b.env["EVENTS_NAMESPACE"] + "none"
		out, _, err := (&testBundle{env: fresh}).run(t, "status")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^consumer gl of t\w+none_WALLET_EVENTS \(this outbox\)\s+not created yet$`, out)
		require.Contains(t, out, "  the durable consumer wallet on "+fresh["EVENTS_NAMESPACE"]+"_GL_EVENTS does not exist yet: it is created when wallet serve starts\n")
	})
	t.Run("a broker that does not answer is reported and the rest still shown", func(t *testing.T) {
		down := maps.Clone(b.env)
		down["NATS_URL"] = "nats://127.0.0.1:1"
		out, _, err := (&testBundle{env: down}).run(t, "status", "--broker-timeout", "300ms")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^broker\s+broker unreachable at nats://127.0.0.1:1: `, out)
		require.Regexp(t, `(?m)^outbox\s+pending 1, `, out)
		require.Regexp(t, `(?m)^inbox\s+processing 0, `, out)
	})
}
