package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/systemtest"
)

// nats-leader-loss waits, before each round and at its end, for each stream's leader and every
// replica current; a replica the broker leaves behind (nats-server 2.9 can, for good) is noted
// after the wait, and a leader with a quorum current is enough. With two nodes of three gone
// there is no quorum, and the scenario fails. Three real nats-server processes; one replica
// killed, then a second.
func TestTheLeaderLossScenarioEndsOnAQuorumAndNotesAReplicaLeftBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := systemtest.NATSServerBinary(ctx, dir)
	require.NoError(t, err)
	brokers, err := systemtest.StartBrokers(ctx, bin, dir, 3)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, b := range brokers {
			_ = b.Kill()
		}
	})
	nc, err := nats.Connect(brokers[0].URL(), nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	const stream = "QUORUM_TEST"
	require.Eventually(t, func() bool {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"quorum.>"}, Replicas: 3})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "an R3 stream on the new cluster")
	_, err = js.Publish(ctx, "quorum.one", []byte("x"))
	require.NoError(t, err)

	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	leader, err := waitStreamQuorum(ctx, js, stream, 30*time.Second, note)
	require.NoError(t, err)
	require.Empty(t, notes, "every replica current: nothing to note")

	// Kill the two nodes the client is not connected to, one at a time, a follower first.
	var others []*systemtest.Broker
	for _, b := range brokers[1:] {
		if b.Name != leader {
			others = append(others, b)
		}
	}
	if brokers[0].Name != leader {
		others = append(others, systemtest.BrokerNamed(brokers, leader))
	}
	require.NoError(t, others[0].Kill())
	require.Eventually(t, func() bool { return !replicaCurrent(ctx, js, stream, others[0].Name) },
		30*time.Second, 200*time.Millisecond, "the leader sees %s gone", others[0].Name)
	notes = nil
	got, err := waitStreamQuorum(ctx, js, stream, 3*time.Second, note)
	require.NoError(t, err, "a leader and one current replica of three are a quorum")
	require.Equal(t, leader, got)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "and a quorum current; "+others[0].Name+" still behind")

	require.NoError(t, others[1].Kill())
	require.Eventually(t, func() bool { return !replicaCurrent(ctx, js, stream, others[1].Name) },
		30*time.Second, 200*time.Millisecond, "the stream sees %s gone, or has no leader left to say", others[1].Name)
	notes = nil
	_, err = waitStreamQuorum(ctx, js, stream, 3*time.Second, note)
	require.Error(t, err, "one node of three is no quorum")
	require.Empty(t, notes)
}

// replicaCurrent says whether the stream's leader reports the replica name online and current;
// no answer (no leader) is a no.
func replicaCurrent(ctx context.Context, js jetstream.JetStream, stream, name string) bool {
	reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := js.Stream(reqCtx, stream)
	if err != nil || st.CachedInfo().Cluster == nil {
		return false
	}
	for _, r := range st.CachedInfo().Cluster.Replicas {
		if r.Name == name {
			return r.Current && !r.Offline
		}
	}
	return false
}
