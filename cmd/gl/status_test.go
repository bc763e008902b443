package main

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/cli/clitest"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	// The GL's state: an event that failed, two acknowledgments the wallet has not taken yet (one
	// of them ten minutes old) and one the broker refused until it was dead-lettered.
	failed := failedEvent(t, pool, "transfer-x", 100)
	_, err := pool.Exec(ctx, `INSERT INTO outbox (id, event_type, aggregate_id, payload, status, dispatched_at, created_at, last_error) VALUES
		('01a22c36-0000-7000-8000-000000000001', 'TransferPosted.v2', 't1', '{}', 'dispatched', now(), now() - interval '10 minutes', NULL),
		('01a22c36-0000-7000-8000-000000000002', 'TransferPosted.v2', 't2', '{}', 'dispatched', now(), now(), NULL),
		('01a22c36-0000-7000-8000-000000000003', 'TransferPosted.v2', 't3', '{}', 'dead_letter', NULL, now(), 'nats: message size exceeds maximum allowed')`)
	require.NoError(t, err)
	// The broker: three transfers waiting for the GL's consumer, one acknowledgment for the wallet's.
	env := glEnv(dbURL)
	maps.Copy(env, clitest.Broker(t, map[string]int{contract.SourceWallet: 3, contract.SourceGL: 1}))

	out, _, err := runGL(t, env, "status")
	require.NoError(t, err)
	require.Regexp(t, `^gl status: database \S+, broker nats://`, out)
	require.Regexp(t, `(?m)^outbox\s+pending 0, dispatching 0, dispatched 2, acknowledged 0, failed 0, dead_letter 1$`, out)
	// Ten minutes and the seconds the command took to start on a busy machine.
	require.Regexp(t, `(?m)^  oldest unacknowledged\s+10m\ds \(created `, out)
	require.Regexp(t, `(?m)^  last error\s+dead_letter 01a22c36-0000-7000-8000-000000000003 at \S+: nats: message size exceeds maximum allowed$`, out)
	require.Regexp(t, `(?m)^consumer wallet of t\w+_GL_EVENTS \(this outbox\)\s+1 pending, 0 unacknowledged, 0 redelivered$`, out)
	require.Regexp(t, `(?m)^consumer gl of t\w+_WALLET_EVENTS \(this inbox\)\s+3 pending, 0 unacknowledged, 0 redelivered$`, out)
	require.Regexp(t, `(?m)^stream \S+_WALLET_EVENTS \(wallet events\)\s+3 messages, .* max age 7d, discard old$`, out)
	require.Less(t, strings.Index(out, "consumer wallet"), strings.Index(out, "consumer gl"), "the flow's order: outbox, its consumer, the inbox's consumer, inbox")
	require.Regexp(t, `(?m)^inbox\s+processing 0, waiting 0, processed 0, failed 1, duplicate 0, resolved 0; duplicates absorbed 0$`, out)
	require.Regexp(t, `(?m)^  last failure\s+exhausted `+failed+` \(TransferCompleted.v1\) at \S+: handler failed on 10 deliveries: no such account$`, out)
	require.Contains(t, out, "attention:\n  1 dead_letter outbox rows wait for an operator: gl outbox list --status dead_letter\n")
	require.Regexp(t, `(?m)^  the oldest unacknowledged outbox row is 10m\ds old: is wallet serve running and consuming\? \(wallet status\)$`, out)
	require.Contains(t, out, "  1 failed inbox events: gl inbox list")
	require.Contains(t, out, `gl inbox resolve ID… --reason "…", or in the console`)

	out, _, err = runGL(t, env, "status", "--json")
	require.NoError(t, err)
	var st cli.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, "gl", st.Service)
	require.Equal(t, int64(2), st.Outbox.Counts["dispatched"])
	require.NotNil(t, st.OutboxLastError)
	require.Equal(t, "dead_letter", st.OutboxLastError.Status)
	require.NotNil(t, st.InboxLastFailure)
	require.Equal(t, failed, st.InboxLastFailure.ID)
	require.Equal(t, contract.ReasonExhausted, st.InboxLastFailure.Reason)
	require.True(t, st.Broker.Reachable)
	require.Len(t, st.Broker.Consumers, 2)
	require.Len(t, st.Broker.Streams, 2)
	require.Equal(t, env["EVENTS_NAMESPACE"]+"_GL_EVENTS", st.Broker.Streams[0].Name, "this service's stream first")
	require.True(t, st.Broker.Streams[1].Exists)
	require.Equal(t, uint64(3), st.Broker.Streams[1].Messages)
	require.Equal(t, "old", st.Broker.Streams[1].Discard)
	require.Equal(t, cli.ConsumerStatus{Name: "wallet", Stream: env["EVENTS_NAMESPACE"] + "_GL_EVENTS", Side: "outbox", Exists: true, Pending: 1}, st.Broker.Consumers[0])
	require.Equal(t, cli.ConsumerStatus{Name: "gl", Stream: env["EVENTS_NAMESPACE"] + "_WALLET_EVENTS", Side: "inbox", Exists: true, Pending: 3}, st.Broker.Consumers[1])
	require.Len(t, st.Attention, 3)

	t.Run("a broker that does not answer is reported and the rest still shown", func(t *testing.T) {
		down := maps.Clone(env)
		down["NATS_URL"] = "nats://127.0.0.1:1"
		out, _, err := runGL(t, down, "status", "--broker-timeout", "300ms")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^broker\s+broker unreachable at nats://127.0.0.1:1: not connected within 300ms`, out)
		require.NotRegexp(t, `(?m)^consumer `, out)
		require.Regexp(t, `(?m)^outbox\s+pending 0, dispatching 0, dispatched 2`, out)
		require.Regexp(t, `(?m)^inbox\s+processing 0, waiting 0, processed 0, failed 1`, out)
		require.Contains(t, out, "  the broker is unreachable")

		out, _, err = runGL(t, down, "status", "--json", "--broker-timeout", "300ms")
		require.NoError(t, err)
		var st cli.Status
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		require.False(t, st.Broker.Reachable)
		require.NotEmpty(t, st.Broker.Error)
		require.Empty(t, st.Broker.Consumers)
		require.Equal(t, int64(1), st.Inbox.Counts["failed"])
	})
}
