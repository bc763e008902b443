package events_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/envtest"
	"walletgl/internal/envtest/cputime"
)

// BenchmarkAcks compares two ways of acknowledging a fetched batch of 100 messages, on a
// JetStream server inside the test process, so that the CPU it reports (cpu-µs/msg: the
// process's user and system time per message, getrusage) is the broker's and the client's
// together:
//
//   - double-each: a double ack of every message, sent in parallel (how the consumer loop
//     once acknowledged);
//   - plain-then-double-last: plain acks and one double ack of the last message (the
//     consumer loop's confirmAcks).
//
// The stream is filled before the timer starts; each iteration consumes and acknowledges one
// message. go test -run '^$' -bench BenchmarkAcks -benchtime 100000x -count 3 ./internal/events
func BenchmarkAcks(b *testing.B) {
	for _, mode := range []string{"double-each", "plain-then-double-last"} {
		b.Run(mode, func(b *testing.B) { benchmarkAcks(b, mode) })
	}
}

func benchmarkAcks(b *testing.B, mode string) {
	ctx := context.Background()
	broker := envtest.StartBroker(b)
	nc, err := nats.Connect(broker.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKS", Subjects: []string{"acks.>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	fillStream(b, js, b.N)
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "gl",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 20000})
	if err != nil {
		b.Fatal(err)
	}

	cpu0 := cputime.Process(b)
	b.ResetTimer()
	var inFlight sync.WaitGroup // one batch of acks in flight at most, as in the consumer loop
	for got := 0; got < b.N; {
		msgs := fetchBatch(b, cons, min(100, b.N-got))
		got += len(msgs)
		inFlight.Wait()
		inFlight.Go(func() { ackBatch(b, mode, msgs) })
	}
	inFlight.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")

	info, err := cons.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Consumer != uint64(b.N) {
		b.Fatalf("%s: %d messages not acknowledged, ack floor %d of %d", mode, info.NumAckPending, info.AckFloor.Consumer, b.N)
	}
}

// fillStream publishes n messages of an event's size, each with its own message id.
func fillStream(b *testing.B, js jetstream.JetStream, n int) {
	b.Helper()
	payload := []byte(strings.Repeat("x", 700))
	for i := range n {
		msg := nats.NewMsg("acks.TransferCompleted.v2")
		msg.Data = payload
		if _, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("stream not filled in a minute")
	}
}

func fetchBatch(b *testing.B, cons jetstream.Consumer, n int) []jetstream.Msg {
	b.Helper()
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	var msgs []jetstream.Msg
	for msg := range batch.Messages() {
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		b.Fatal("fetch returned nothing")
	}
	return msgs
}

func ackBatch(b *testing.B, mode string, msgs []jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last := len(msgs) - 1
	switch mode {
	case "double-each":
		var wg sync.WaitGroup
		for _, msg := range msgs {
			wg.Go(func() {
				if err := msg.DoubleAck(ctx); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	default:
		for _, msg := range msgs[:last] {
			if err := msg.Ack(); err != nil {
				b.Error(err)
			}
		}
		if err := msgs[last].DoubleAck(ctx); err != nil {
			b.Error(err)
		}
	}
}
