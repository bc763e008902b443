package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"walletgl/internal/events/contract"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// The topology's settings when a Topology leaves them zero.
const (
	DefaultStreamMaxAge    = 7 * 24 * time.Hour // how long an event may stay in a stream, read or not
	DefaultStreamMaxBytes  = 1 << 30            // 1 GiB per stream, reserved from the broker's store
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultAckWait         = 30 * time.Second
	DefaultMaxDeliver      = 10
	DefaultMaxAckPending   = 1000
)

// Topology is the whole JetStream layout as one value: the two streams (one per producing
// service) and the two durable consumers (one per direction), with their limits. It names
// them and creates them; both services build it from the same settings, so each can create
// what it needs at start-up, idempotently.
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
	// MaxAge and MaxBytes limit each stream (0: DefaultStreamMaxAge, DefaultStreamMaxBytes).
	// The stream is a bounded transport, the outbox the record: a stream at MaxBytes discards
	// its oldest messages (discard policy old) and never refuses a new one, and the relay
	// holds rows back in the outbox while the events no consumer has read fill outbox.UnreadShare of
	// MaxBytes, so what leaves a full stream has been read. Messages older than MaxAge leave
	// the stream whether read or not; a row whose message left unread is published again by
	// the relay's catch-up.
	MaxAge   time.Duration
	MaxBytes int64
	// AckWait, MaxDeliver and MaxAckPending are the durable consumers' delivery settings (0:
	// DefaultAckWait, DefaultMaxDeliver, DefaultMaxAckPending); see ConsumerSpec.
	AckWait       time.Duration
	MaxDeliver    int
	MaxAckPending int
	// Log hears about limits kept because an operator raised them above the configuration.
	Log zerolog.Logger
}

// The durable consumers: each service's name is also its inbox prefix ("gl:<event id>").
const (
	ConsumerGL     = "gl"     // reads TransferCompleted.v2 (and v1), TransferReversed.v1 and the Hold*.v1 events from the wallet's stream
	ConsumerWallet = "wallet" // reads TransferPosted.v2 (and .v1) from the GL's stream
)

// durables declares the pipeline's durable consumers: who reads which event from whose stream.
var durables = []ConsumerSpec{
	{Name: ConsumerGL, Source: contract.SourceWallet, EventType: contract.TypeTransferCompletedV2, Accepts: []string{contract.TypeTransferCompleted},
		Also: []string{contract.TypeTransferReversed, contract.TypeHoldPlaced, contract.TypeHoldCaptured, contract.TypeHoldVoided}},
	{Name: ConsumerWallet, Source: contract.SourceGL, EventType: contract.TypeTransferPostedV2, Accepts: []string{contract.TypeTransferPosted}},
}

// Readers are the names of the durable consumers that read source's stream: the relay holds
// rows back while the slowest of them is far behind (outbox.UnreadShare).
func (t Topology) Readers(source string) []string {
	var names []string
	for _, spec := range durables {
		if spec.Source == source {
			names = append(names, spec.Name)
		}
	}
	return names
}

// Consumer is the durable consumer called name (ConsumerGL or ConsumerWallet) with the
// topology's delivery settings.
func (t Topology) Consumer(name string) (ConsumerSpec, error) {
	for _, spec := range durables {
		if spec.Name == name {
			spec.AckWait = orDefault(t.AckWait, DefaultAckWait)
			spec.MaxDeliver = int(orDefault(int64(t.MaxDeliver), DefaultMaxDeliver))
			spec.MaxAckPending = int(orDefault(int64(t.MaxAckPending), DefaultMaxAckPending))
			return spec, nil
		}
	}
	return ConsumerSpec{}, fmt.Errorf("no durable consumer %q in the topology", name)
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
// wallet.contract.TransferCompleted.v1.
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
// recent events stay replayable after they were consumed, and discard policy old, so a full
// stream makes room by dropping its oldest messages instead of refusing new ones.
func (t Topology) StreamConfig(source string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        t.StreamName(source),
		Description: source + " events: the transport of the transactional outbox, recent events replayable",
		Subjects:    []string{t.subjectPrefix(source) + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  orDefault(t.DuplicateWindow, DefaultDuplicateWindow),
		Replicas:    max(t.Replicas, 1),
		MaxMsgSize:  t.MaxMsgSize,
		MaxAge:      orDefault(t.MaxAge, DefaultStreamMaxAge),
		MaxBytes:    orDefault(t.MaxBytes, DefaultStreamMaxBytes),
	}
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// EnsureStreams creates the streams of both services, or updates them to the configuration.
// An update never lowers a limit (age, bytes, message size, duplicate window) that an operator
// raised above the configuration on the running stream: lowering it could throw away events or
// let a re-publish through as a second copy. Such a limit is kept and logged; to lower one,
// change the stream with the nats CLI. Any other setting the update changes on a running
// stream is logged with its old and new value: nothing is reset silently.
func (t Topology) EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, source := range []string{contract.SourceWallet, contract.SourceGL} {
		if err := t.ensureStream(ctx, js, t.StreamConfig(source)); err != nil {
			return err
		}
	}
	return nil
}

func (t Topology) ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	stream, err := js.Stream(ctx, cfg.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	running := stream.CachedInfo().Config
	cfg = t.keepRaisedLimits(cfg, running)
	if !t.reportChanges(cfg, running) {
		return nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("update stream %s: %w", cfg.Name, err)
	}
	return nil
}

// keepRaisedLimits returns want with each limit that running has higher (or unlimited) kept.
func (t Topology) keepRaisedLimits(want, running jetstream.StreamConfig) jetstream.StreamConfig {
	keep := func(name string, configured, current int64) int64 {
		if limitAbove(current, configured) {
			t.Log.Info().Str("stream", want.Name).Str("limit", name).Int64("running", current).Int64("configured", configured).
				Msg("keeping the stream's limit raised by an operator above the configuration")
			return current
		}
		return configured
	}
	want.MaxAge = time.Duration(keep("max_age_ns", int64(want.MaxAge), int64(running.MaxAge)))
	want.MaxBytes = keep("max_bytes", want.MaxBytes, running.MaxBytes)
	want.MaxMsgSize = int32(keep("max_msg_size", int64(want.MaxMsgSize), int64(running.MaxMsgSize)))
	want.Duplicates = time.Duration(keep("duplicate_window_ns", int64(want.Duplicates), int64(running.Duplicates)))
	return want
}

// reportChanges logs each setting of the running stream that an update to want changes, at
// warn: an operator's setting that the configuration overrides is said, never silently
// reset. It reports whether anything is to change at all.
func (t Topology) reportChanges(want, running jetstream.StreamConfig) bool {
	changes := []struct {
		name          string
		running, want any
	}{
		{"max_age", running.MaxAge, want.MaxAge},
		{"max_bytes", running.MaxBytes, want.MaxBytes},
		{"max_msg_size", running.MaxMsgSize, want.MaxMsgSize},
		{"duplicate_window", running.Duplicates, want.Duplicates},
		{"discard", running.Discard, want.Discard},
		{"replicas", running.Replicas, want.Replicas},
		{"description", running.Description, want.Description},
		{"subjects", fmt.Sprint(running.Subjects), fmt.Sprint(want.Subjects)},
	}
	changed := false
	for _, c := range changes {
		if c.running == c.want {
			continue
		}
		changed = true
		t.Log.Warn().Str("stream", want.Name).Str("setting", c.name).Str("running", fmt.Sprint(c.running)).
			Str("configured", fmt.Sprint(c.want)).Msg("setting the stream's configuration over its running value")
	}
	return changed
}

// limitAbove reports whether limit a lets more through than b; 0 and -1 mean unlimited.
func limitAbove(a, b int64) bool {
	unlimited := func(v int64) bool { return v <= 0 }
	switch {
	case unlimited(b):
		return false
	case unlimited(a):
		return true
	}
	return a > b
}

// ConsumerSpec describes one durable pull consumer: name (also the inbox prefix), the stream
// it reads (by source) and the event type it takes, with the earlier versions of that type it
// still accepts.
type ConsumerSpec struct {
	Name      string
	Source    string
	EventType string
	// Accepts are earlier versions of EventType the consumer still takes (its handler upcasts
	// them), so the producer may be upgraded before or after it. With any, the consumer's
	// filter is every version of the type ("<prefix>.TransferPosted.*").
	Accepts []string
	// Also are other event types of the same producer the consumer takes, each a movement of
	// its own that its handler applies (the GL's TransferReversed.v1). With any, the
	// consumer's filter is every event of the stream ("<prefix>.*.*": a type is Name.vN), and
	// an event of a type it does not take is recorded failed (malformed) at once.
	Also    []string
	AckWait time.Duration
	// MaxDeliver is how many deliveries whose handler ran and failed make the consumer loop
	// record an event failed. The broker itself never gives up on a message (its MaxDeliver
	// is unlimited): a message it dropped would move the ack floor without anybody applying
	// it, and a database that is down must never turn into a lost or failed event.
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
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, t.consumerConfig(spec))
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s on %s: %w", spec.Name, stream, err)
	}
	return cons, nil
}

// CreateReplayConsumer creates a consumer of its own that reads what spec's durable consumer
// reads, from the first event still in the stream. It is ephemeral: it has no name to borrow
// from the live consumer, which it never touches, and the broker removes it a minute after its
// last use if nobody deletes it.
func (t Topology) CreateReplayConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, error) {
	cfg := t.consumerConfig(spec)
	cfg.Durable, cfg.Description, cfg.InactiveThreshold = "", spec.Name+" replay of "+spec.EventType, time.Minute
	stream := t.StreamName(spec.Source)
	cons, err := js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("create replay consumer on %s: %w", stream, err)
	}
	return cons, nil
}

// consumerConfig is the broker's configuration of spec's durable consumer.
func (t Topology) consumerConfig(spec ConsumerSpec) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       spec.Name,
		Description:   spec.Name + " takes " + spec.EventType,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    -1, // see ConsumerSpec.MaxDeliver
		MaxAckPending: spec.MaxAckPending,
		FilterSubject: t.filterSubject(spec),
	}
}

// filterSubject is the subject spec's consumer reads: its event type's, or every version of
// it when it accepts earlier ones.
func (t Topology) filterSubject(spec ConsumerSpec) string {
	if len(spec.Also) > 0 {
		// Only single-token wildcards: nats.go puts the filter into the create request's
		// subject, as for Accepts.
		return t.subjectPrefix(spec.Source) + ".*.*"
	}
	if len(spec.Accepts) == 0 {
		return t.Subject(spec.Source, spec.EventType)
	}
	family, _, _ := strings.Cut(spec.EventType, ".")
	return t.subjectPrefix(spec.Source) + "." + family + ".*"
}

// Takes reports whether the consumer of spec handles events of eventType.
func (spec ConsumerSpec) Takes(eventType string) bool {
	return eventType == spec.EventType || slices.Contains(spec.Accepts, eventType) || slices.Contains(spec.Also, eventType)
}

// Permissions are the subjects a service's NATS user may publish and subscribe to: its own
// events, the JetStream API calls it makes (the two streams looked up, created and updated at
// start; its durable consumer created, read and pulled from; acknowledgments of its deliveries;
// for the GL, the wallet consumer's state and the messages of its own stream, which its relay
// checks before it acknowledges a row), and replies. Nothing else: the GL's user cannot
// publish a wallet event, nor the wallet's a GL one. docs/security.md shows them as a
// nats-server configuration; the operator commands that ask the broker (status, gl replay)
// need more, or an operator's user.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// Permissions returns the permissions of service (contract.SourceWallet or contract.SourceGL).
func (t Topology) Permissions(service string) (Permissions, error) {
	durable := map[string]string{contract.SourceWallet: ConsumerWallet, contract.SourceGL: ConsumerGL}[service]
	spec, err := t.Consumer(durable)
	if err != nil {
		return Permissions{}, fmt.Errorf("permissions of %q: %w", service, err)
	}
	source := t.StreamName(spec.Source)
	pub := []string{t.subjectPrefix(service) + ".>"}
	for _, s := range []string{t.StreamName(contract.SourceWallet), t.StreamName(contract.SourceGL)} {
		pub = append(pub, "$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s)
	}
	consumer := source + "." + spec.Name
	pub = append(pub,
		"$JS.API.CONSUMER.CREATE."+consumer, "$JS.API.CONSUMER.CREATE."+consumer+".>",
		"$JS.API.CONSUMER.DURABLE.CREATE."+consumer, "$JS.API.CONSUMER.INFO."+consumer,
		"$JS.API.CONSUMER.MSG.NEXT."+consumer, "$JS.ACK."+consumer+".>",
	)
	// The relay reads how far the readers of its own stream are (outbox.UnreadShare) and the messages
	// stored there (catch-up, and the GL's acknowledgment by ack floor).
	own := t.StreamName(service)
	for _, reader := range t.Readers(service) {
		pub = append(pub, "$JS.API.CONSUMER.INFO."+own+"."+reader)
	}
	pub = append(pub, "$JS.API.STREAM.MSG.GET."+own)
	return Permissions{Publish: pub, Subscribe: []string{"_INBOX.>"}}, nil
}
