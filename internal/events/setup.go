package events

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/events/contract"
)

// What Check and Setup say about a stream or a consumer.
const (
	KindStream   = "stream"
	KindConsumer = "consumer"

	ActionCreated   = "created"
	ActionUpdated   = "updated"
	ActionUnchanged = "unchanged"
)

// Difference is one way the broker's topology differs from the configuration: a stream or a
// consumer missing (Setting empty), or one of its settings.
type Difference struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"` // a stream, or a consumer as stream/consumer
	Setting    string `json:"setting,omitempty"`
	Running    string `json:"running,omitempty"`
	Configured string `json:"configured,omitempty"`
}

func (d Difference) String() string {
	if d.Setting == "" {
		return fmt.Sprintf("%s %s is missing", d.Kind, d.Name)
	}
	return fmt.Sprintf("%s %s has %s %s, configured %s", d.Kind, d.Name, d.Setting, d.Running, d.Configured)
}

// Applied is what Setup did to one stream or consumer, and the settings it changed.
type Applied struct {
	Kind    string       `json:"kind"`
	Name    string       `json:"name"`
	Action  string       `json:"action"` // ActionCreated, ActionUpdated, ActionUnchanged
	Changes []Difference `json:"changes,omitempty"`
}

// serviceConsumer is the durable consumer service (contract.SourceWallet, contract.SourceGL)
// reads with.
func (t Topology) serviceConsumer(service string) (ConsumerSpec, error) {
	durable, ok := map[string]string{contract.SourceWallet: ConsumerWallet, contract.SourceGL: ConsumerGL}[service]
	if !ok {
		return ConsumerSpec{}, fmt.Errorf("no service %q in the topology", service)
	}
	return t.Consumer(durable)
}

// Check compares the broker's topology with what service needs: both streams (its own, which
// it publishes to, and the other's, which it reads) and its durable consumer. It only asks the
// broker (stream and consumer INFO), so a service's least-privileged user may run it. A limit
// an operator raised above the configuration is no difference (EnsureStreams keeps it).
func (t Topology) Check(ctx context.Context, js jetstream.JetStream, service string) ([]Difference, error) {
	spec, err := t.serviceConsumer(service)
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	for _, source := range []string{contract.SourceWallet, contract.SourceGL} {
		want := t.StreamConfig(source)
		stream, err := js.Stream(ctx, want.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			diffs = append(diffs, Difference{Kind: KindStream, Name: want.Name})
			continue
		case err != nil:
			return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
		}
		running := stream.CachedInfo().Config
		diffs = append(diffs, streamDifferences(t.keepRaisedLimits(want, running), running)...)
	}
	stream := t.StreamName(spec.Source)
	name := stream + "/" + spec.Name
	cons, err := js.Consumer(ctx, stream, spec.Name)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound), errors.Is(err, jetstream.ErrStreamNotFound):
		return append(diffs, Difference{Kind: KindConsumer, Name: name}), nil
	case err != nil:
		return nil, fmt.Errorf("look up consumer %s: %w", name, err)
	}
	return append(diffs, consumerDifferences(name, t.consumerConfig(spec), cons.CachedInfo().Config)...), nil
}

// Setup creates or updates what service needs (see Check) to the configuration, as
// EnsureStreams and EnsureConsumer do, and says what it did to each stream and consumer. It
// needs the rights to create and update streams and consumers: an operator's user
// (OperatorPermissions), through `<service> events setup`.
func (t Topology) Setup(ctx context.Context, js jetstream.JetStream, service string) ([]Applied, error) {
	spec, err := t.serviceConsumer(service)
	if err != nil {
		return nil, err
	}
	applied, err := t.setupStreams(ctx, js)
	if err != nil {
		return applied, err
	}
	_, a, err := t.ensureConsumer(ctx, js, spec)
	if err != nil {
		return applied, err
	}
	return append(applied, a), nil
}

// Differences joins diffs into one line for an error or a log.
func Differences(diffs []Difference) string {
	s := make([]string, len(diffs))
	for i, d := range diffs {
		s[i] = d.String()
	}
	return strings.Join(s, "; ")
}
