package systemtest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster StartBrokers returns answers JetStream at once: every node knows the meta leader,
// so a service started next does not wait out its first requests' timeouts.
func TestAStartedClusterAnswersJetStreamAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := NATSServerBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := StartBrokers(ctx, bin, dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range brokers {
			_ = b.Kill()
		}
	})
	for _, b := range brokers {
		nc, err := nats.Connect(b.URL())
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		lookup, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.Stream(lookup, "NONE")
		cancel()
		nc.Close()
		if err != jetstream.ErrStreamNotFound {
			t.Fatalf("a stream lookup through %s: %v, want %v (an answer from the meta leader)", b.Name, err, jetstream.ErrStreamNotFound)
		}
	}
}
