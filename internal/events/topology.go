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
// them, creates them (Setup, EnsureStreams, EnsureConsumer) and checks them (Check); both
// services and `events setup` build it from the same settings.
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
	ConsumerGL     = "gl"     // reads TransferCompleted.v2 (and v1), TransferReversed.v1, the Hold*.v1 and the TransferBatch*.v1 events from the wallet's stream
	ConsumerWallet = "wallet" // reads TransferPosted.v2 (and .v1) from the GL's stream
)

// durables declares the pipeline's durable consumers: who reads which event from whose stream.
var durables = []ConsumerSpec{
	{Name: ConsumerGL, Source: contract.SourceWallet, EventType: contract.TypeTransferCompletedV2, Accepts: []string{contract.TypeTransferCompleted},
		Also: []string{contract.TypeTransferReversed, contract.TypeHoldPlaced, contract.TypeHoldCaptured, contract.TypeHoldVoided,
			contract.TypeTransferBatchCompleted, contract.TypeTransferBatchReversed}},
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
// stream is logged with its old and new value: nothing is reset silently. A stream that
// already matches is only looked up, which needs no more than the right to ask its INFO.
func (t Topology) EnsureStreams(ctx context.Context, js jetstream.JetStream) error {
	_, err := t.setupStreams(ctx, js)
	return err
}

func (t Topology) setupStreams(ctx context.Context, js jetstream.JetStream) ([]Applied, error) {
	var applied []Applied
	for _, source := range []string{contract.SourceWallet, contract.SourceGL} {
		a, err := t.ensureStream(ctx, js, t.StreamConfig(source))
		if err != nil {
			return applied, err
		}
		applied = append(applied, a)
	}
	return applied, nil
}

func (t Topology) ensureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (Applied, error) {
	a := Applied{Kind: KindStream, Name: cfg.Name, Action: ActionUnchanged}
	stream, err := js.Stream(ctx, cfg.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := js.CreateStream(ctx, cfg); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return a, fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		a.Action = ActionCreated
		return a, nil
	case err != nil:
		return a, fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	running := stream.CachedInfo().Config
	cfg = t.keepRaisedLimits(cfg, running)
	a.Changes = t.reportChanges(cfg, running)
	if len(a.Changes) == 0 {
		return a, nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return a, fmt.Errorf("update stream %s: %w", cfg.Name, err)
	}
	a.Action = ActionUpdated
	return a, nil
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
// reset. It returns those settings.
func (t Topology) reportChanges(want, running jetstream.StreamConfig) []Difference {
	diffs := streamDifferences(want, running)
	for _, d := range diffs {
		t.Log.Warn().Str("stream", want.Name).Str("setting", d.Setting).Str("running", d.Running).
			Str("configured", d.Configured).Msg("setting the stream's configuration over its running value")
	}
	return diffs
}

// streamDifferences are the settings of running that differ from want.
func streamDifferences(want, running jetstream.StreamConfig) []Difference {
	changes := []struct {
		name          string
		running, want any
	}{
		{"max_age", running.MaxAge, want.MaxAge},
		{"max_bytes", running.MaxBytes, want.MaxBytes},
		{"max_msg_size", unlimitedAsMinusOne(running.MaxMsgSize), unlimitedAsMinusOne(want.MaxMsgSize)},
		{"duplicate_window", running.Duplicates, want.Duplicates},
		{"discard", running.Discard, want.Discard},
		{"replicas", running.Replicas, want.Replicas},
		{"description", running.Description, want.Description},
		{"subjects", fmt.Sprint(running.Subjects), fmt.Sprint(want.Subjects)},
	}
	var diffs []Difference
	for _, c := range changes {
		if c.running != c.want {
			diffs = append(diffs, Difference{Kind: KindStream, Name: want.Name, Setting: c.name, Running: fmt.Sprint(c.running), Configured: fmt.Sprint(c.want)})
		}
	}
	return diffs
}

// unlimitedAsMinusOne is limit with 0, which the broker stores as -1, written as -1: both mean
// unlimited.
func unlimitedAsMinusOne(limit int32) int32 {
	if limit <= 0 {
		return -1
	}
	return limit
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
// A consumer that already matches is only looked up, which needs no more than the right to ask
// its INFO. On nats-server 2.9 CreateOrUpdateConsumer is also what re-creates a consumer lost
// with the broker's store; its configuration is fully given here, so an overwrite is harmless.
func (t Topology) EnsureConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, error) {
	if err := t.EnsureStreams(ctx, js); err != nil {
		return nil, err
	}
	cons, _, err := t.ensureConsumer(ctx, js, spec)
	return cons, err
}

func (t Topology) ensureConsumer(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec) (jetstream.Consumer, Applied, error) {
	stream, want := t.StreamName(spec.Source), t.consumerConfig(spec)
	a := Applied{Kind: KindConsumer, Name: stream + "/" + spec.Name, Action: ActionUnchanged}
	cons, err := js.Consumer(ctx, stream, spec.Name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		a.Action = ActionCreated
	case err != nil:
		return nil, a, fmt.Errorf("look up consumer %s on %s: %w", spec.Name, stream, err)
	default:
		if a.Changes = consumerDifferences(a.Name, want, cons.CachedInfo().Config); len(a.Changes) == 0 {
			return cons, a, nil
		}
		a.Action = ActionUpdated
		for _, d := range a.Changes {
			t.Log.Warn().Str("consumer", a.Name).Str("setting", d.Setting).Str("running", d.Running).
				Str("configured", d.Configured).Msg("setting the consumer's configuration over its running value")
		}
	}
	cons, err = js.CreateOrUpdateConsumer(ctx, stream, want)
	if err != nil {
		return nil, a, fmt.Errorf("ensure consumer %s on %s: %w", spec.Name, stream, err)
	}
	return cons, a, nil
}

// consumerDifferences are the settings of the running consumer called name that differ from
// want: those the topology sets (the broker fills in the others).
func consumerDifferences(name string, want, running jetstream.ConsumerConfig) []Difference {
	filter := running.FilterSubject
	if filter == "" && len(running.FilterSubjects) == 1 {
		filter = running.FilterSubjects[0]
	}
	changes := []struct {
		name          string
		running, want any
	}{
		{"description", running.Description, want.Description},
		{"filter_subject", filter, want.FilterSubject},
		{"deliver_policy", running.DeliverPolicy, want.DeliverPolicy},
		{"ack_policy", running.AckPolicy, want.AckPolicy},
		{"ack_wait", running.AckWait, want.AckWait},
		{"max_deliver", running.MaxDeliver, want.MaxDeliver},
		{"max_ack_pending", running.MaxAckPending, want.MaxAckPending},
	}
	var diffs []Difference
	for _, c := range changes {
		if c.running != c.want {
			diffs = append(diffs, Difference{Kind: KindConsumer, Name: name, Setting: c.name, Running: fmt.Sprint(c.running), Configured: fmt.Sprint(c.want)})
		}
	}
	return diffs
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

// Permissions are the subjects a NATS user may publish and subscribe to. A service's user
// (Topology.Permissions) may publish its own events and make the JetStream API calls serve
// makes: the two streams' and its durable consumer's INFO (the topology check at start, and
// the consumer's liveness check), its consumer pulled from and its deliveries acknowledged,
// and, for its relay, the readers of its own stream asked how far they are and that stream's
// messages read (catch-up, the GL's acknowledgment by ack floor). It may not create, update or
// delete a stream or a consumer: an operator does that (OperatorPermissions, `events setup`).
// It takes replies on its own ReplyPrefix alone, so it reads no other user's replies, and the
// GL's user cannot publish a wallet event, nor the wallet's a GL one. docs/security.md shows
// these as a nats-server configuration.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// OperatorUser is the NATS user of the operator commands: events setup, status and gl replay.
const OperatorUser = "operator"

// UserPermissions returns the permissions of the NATS user called user: a service's
// (contract.SourceWallet, contract.SourceGL) or OperatorUser's.
func (t Topology) UserPermissions(user string) (Permissions, error) {
	if user == OperatorUser {
		return t.OperatorPermissions(), nil
	}
	return t.Permissions(user)
}

// Permissions returns the permissions of service's user (contract.SourceWallet or
// contract.SourceGL).
func (t Topology) Permissions(service string) (Permissions, error) {
	spec, err := t.serviceConsumer(service)
	if err != nil {
		return Permissions{}, fmt.Errorf("permissions of %q: %w", service, err)
	}
	pub := []string{t.subjectPrefix(service) + ".>"}
	for _, s := range []string{t.StreamName(contract.SourceWallet), t.StreamName(contract.SourceGL)} {
		pub = append(pub, "$JS.API.STREAM.INFO."+s)
	}
	consumer := t.StreamName(spec.Source) + "." + spec.Name
	pub = append(pub, "$JS.API.CONSUMER.INFO."+consumer, "$JS.API.CONSUMER.MSG.NEXT."+consumer, "$JS.ACK."+consumer+".>")
	own := t.StreamName(service)
	for _, reader := range t.Readers(service) {
		pub = append(pub, "$JS.API.CONSUMER.INFO."+own+"."+reader)
	}
	pub = append(pub, "$JS.API.STREAM.MSG.GET."+own)
	return Permissions{Publish: pub, Subscribe: []string{ReplyPrefix(service) + ".>"}}, nil
}

// OperatorPermissions are those of OperatorUser: on the two streams only, look them up,
// create and update them (events setup), read their messages, and create, look up, read and
// delete their consumers (events setup, status, and gl replay's consumer of its own); replies
// on ReplyPrefix(OperatorUser). It publishes no event and deletes no stream.
func (t Topology) OperatorPermissions() Permissions {
	var pub []string
	for _, s := range []string{t.StreamName(contract.SourceWallet), t.StreamName(contract.SourceGL)} {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s, "$JS.API.STREAM.MSG.GET."+s,
			"$JS.API.CONSUMER.CREATE."+s, "$JS.API.CONSUMER.CREATE."+s+".>", "$JS.API.CONSUMER.DURABLE.CREATE."+s+".*",
			"$JS.API.CONSUMER.INFO."+s+".*", "$JS.API.CONSUMER.MSG.NEXT."+s+".*", "$JS.API.CONSUMER.DELETE."+s+".*",
			"$JS.ACK."+s+".>",
		)
	}
	return Permissions{Publish: pub, Subscribe: []string{ReplyPrefix(OperatorUser) + ".>"}}
}
