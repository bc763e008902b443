package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Topology names the streams, subjects and consumers, and creates them. Both services build it
// from the same settings, so each can create what it needs at start-up, idempotently.
type Topology struct {
	// Namespace prefixes every stream and subject, so several deployments (or tests) can share
	// one NATS server. Empty in production.
	Namespace string
	// DuplicateWindow is how long the broker remembers a Nats-Msg-Id to drop a re-publish.
	DuplicateWindow time.Duration
	// Replicas of each stream: 1 on a single server, 3 on a three-node cluster.
	Replicas int
	// MaxMsgSize caps one message; 0 leaves the server's limit.
	MaxMsgSize int32
}

// StreamName is the name of the stream holding source's events, e.g. WALLET_EVENTS.
func (t Topology) StreamName(source string) string {
	name := strings.ToUpper(source) + "_EVENTS"
	if t.Namespace != "" {
		name = t.Namespace + "_" + name
	}
	return name
}

// Subject is the subject an event of eventType from source is published on, e.g.
// wallet.events.TransferCompleted.v1.
func (t Topology) Subject(source, eventType string) string {
	return t.subjectPrefix(source) + "." + eventType
}

func (t Topology) subjectPrefix(source string) string {
	prefix := source + ".events"
	if t.Namespace != "" {
		prefix = t.Namespace + "." + prefix
	}
	return prefix
}

// StreamConfig is the configuration of source's stream: file storage and limits retention, so
// the events stay replayable after they were consumed.
func (t Topology) StreamConfig(source string) jetstream.StreamConfig {
	window := t.DuplicateWindow
	if window <= 0 {
		window = 2 * time.Minute
	}
	replicas := t.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name:        t.StreamName(source),
		Description: source + " events: the transactional outbox's log, replayable",
		Subjects:    []string{t.subjectPrefix(source) + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  window,
		Replicas:    replicas,
		MaxMsgSize:  t.MaxMsgSize,
	}
}

// EnsureStreams creates or updates the streams of both services.
func (t Topology) EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, source := range []string{SourceWallet, SourceGL} {
		cfg := t.StreamConfig(source)
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// ConsumerSpec describes one durable pull consumer: name (also the inbox prefix), the stream
// it reads (by source) and the one event type it takes.
type ConsumerSpec struct {
	Name          string
	Source        string
	EventType     string
	AckWait       time.Duration
	MaxDeliver    int
	MaxAckPending int
}

// EnsureConsumer creates or updates the durable consumer of spec (and the streams first).
// On nats-server 2.9 CreateOrUpdateConsumer is also what re-creates a consumer lost with the
// broker's store; its configuration is fully given here, so an overwrite is harmless.
func (t Topology) EnsureConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, error) {
	if err := t.EnsureStreams(ctx, js); err != nil {
		return nil, err
	}
	stream := t.StreamName(spec.Source)
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       spec.Name,
		Description:   spec.Name + " takes " + spec.EventType,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxDeliver,
		MaxAckPending: spec.MaxAckPending,
		FilterSubject: t.Subject(spec.Source, spec.EventType),
	})
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", spec.Name, stream, err)
	}
	return cons, nil
}

// isTopologyMissing reports whether err says a stream or consumer does not exist (for
// example after the broker lost its store), so the caller should ensure the topology again.
func isTopologyMissing(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrConsumerDeleted)
}

// The durable consumers: each service's name is also its inbox prefix ("gl:<event id>").
const (
	ConsumerGL     = "gl"     // reads TransferCompleted.v1 from the wallet's stream
	ConsumerWallet = "wallet" // reads TransferPosted.v1 from the GL's stream
)
