package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
)

// BenchmarkReplay times gl replay --from-start (the command, as an operator runs it, without
// the closing check against the wallet) over a stream of REPLAY_BENCH_EVENTS signed
// TransferCompleted.v1 events (default 20,000), each iteration into a fresh database, and
// reports events/s as the command prints it. The stream is filled once, before the timer:
//
//	REPLAY_BENCH_EVENTS=50000 go test ./cmd/gl -run '^$' -bench BenchmarkReplay -benchtime 3x
func BenchmarkReplay(b *testing.B) {
	n := 20000
	if s := os.Getenv("REPLAY_BENCH_EVENTS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err, "REPLAY_BENCH_EVENTS")
	}
	bundle := newReplayBundle(b)
	bundle.fill(b, n)
	env := bundle.env("")
	delete(env, "EVENTS_BATCH_SIZE") // the defaults, as an operator has them
	env["EVENTS_STREAM_MAX_BYTES"] = strconv.Itoa(benchStreamMaxBytes)
	rate := regexp.MustCompile(`(?m)^  rate +(\d+) events/s$`)
	var rates float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		env["GL_DATABASE_URL"] = envtest.DatabaseURL(b)
		b.StartTimer()
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"replay", "--from-start", "--no-reconcile", "--into", env["GL_DATABASE_URL"]},
			func(k string) string { return env[k] }, &out, &errOut)
		require.NoError(b, err, errOut.String())
		b.StopTimer()
		require.Contains(b, out.String(), fmt.Sprintf("  events read          %d\n", n))
		require.Contains(b, out.String(), fmt.Sprintf("  entries posted       %d\n", n))
		m := rate.FindStringSubmatch(out.String())
		require.Len(b, m, 2, out.String())
		r, _ := strconv.ParseFloat(m[1], 64)
		rates += r
		b.StartTimer()
	}
	b.ReportMetric(rates/float64(b.N), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// benchStreamMaxBytes holds the benchmark's stream: about 700 bytes a signed event, 50,000 of them fit.
const benchStreamMaxBytes = 64 << 20

// fill publishes n signed TransferCompleted.v1 events in the relay's envelope, with at most a
// few thousand publishes in flight.
func (b *replayBundle) fill(t testing.TB, n int) {
	t.Helper()
	ctx := context.Background()
	// The stream of a benchmark is larger than a test's.
	topo := b.topo
	topo.MaxBytes = benchStreamMaxBytes
	require.NoError(t, topo.EnsureStreams(ctx, b.js))
	subject := b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted)
	created := time.Now().UTC()
	for i := range n {
		id := uuid.New()
		transfer := contract.TransferCompleted{
			TransferID: uuid.NewString(), FromWalletID: "w-a", ToWalletID: "w-b",
			Amount: int64(100 + i%1000), Currency: []string{"USD", "EUR"}[i%2], CreatedAt: created,
		}
		data, err := json.Marshal(transfer)
		require.NoError(t, err)
		body, err := json.Marshal(contract.Envelope{
			SpecVersion: "1.0", ID: id.String(), Source: contract.SourceWallet, Type: contract.TypeTransferCompleted,
			Subject: transfer.TransferID, Time: created, DataContentType: "application/json", Data: data,
		})
		require.NoError(t, err)
		msg := nats.NewMsg(subject)
		msg.Data = body
		b.keys.Wallet.Sign(msg)
		if _, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(id.String())); err != nil {
			require.NoError(t, err)
		}
		if b.js.PublishAsyncPending() >= 2000 {
			select {
			case <-b.js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("publishes not confirmed within 30s")
			}
		}
	}
	select {
	case <-b.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishes not confirmed within 30s")
	}
	info, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	require.Equal(t, uint64(n), info.CachedInfo().State.Msgs, "every event on the stream")
}
