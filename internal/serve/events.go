package serve

import (
	"errors"

	"walletgl/internal/config"
	"walletgl/internal/events"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/events/signing"
	"walletgl/internal/faults"
)

// Events is the event pipeline's settings as both services take them, each part declared,
// defaulted and validated by the component it configures; Events adds only what spans
// components.
type Events struct {
	Broker   events.Broker
	Topology events.Topology
	Relay    outbox.RelayConfig
	Consumer inbox.ConsumerConfig
	Signing  signing.Settings
	Faults   faults.Settings
}

// Bind declares every part's settings.
func (e *Events) Bind(s *config.Set) {
	e.Broker.Bind(s)
	e.Topology.Bind(s)
	e.Relay.Bind(s)
	e.Consumer.Bind(s)
	e.Signing.Bind(s)
	e.Faults.Bind(s)
}

// Validate reports every setting out of range, and an inbox retention shorter than the
// producer's stream and outbox keep an event (inbox.CheckRetention).
func (e Events) Validate() error {
	return errors.Join(e.Broker.Validate(), e.Topology.Validate(), e.Relay.Validate(), e.Consumer.Validate(),
		inbox.CheckRetention(e.Consumer.InboxRetention, e.Topology.MaxAge, e.Topology.DuplicateWindow, e.Relay.Retention))
}

// RelayFor is the relay configuration of source's outbox, signing with signer; ackConsumer,
// when set, acknowledges rows by its ack floor (outbox.RelayConfig.AckConsumer).
func (e Events) RelayFor(source, ackConsumer string, f *faults.Set, signer *signing.Key) outbox.RelayConfig {
	c := e.Relay
	c.Source, c.AckConsumer, c.Faults, c.Signer = source, ackConsumer, f, signer
	return c
}

// ConsumerFor is the configuration of the durable consumer called name (events.ConsumerGL or
// events.ConsumerWallet) as the topology declares it, fetching EVENTS_BATCH_SIZE events a
// round and verifying them with trust.
func (e Events) ConsumerFor(name string, f *faults.Set, trust *signing.Trust) (inbox.ConsumerConfig, error) {
	spec, err := e.Topology.Consumer(name)
	if err != nil {
		return inbox.ConsumerConfig{}, err
	}
	c := e.Consumer
	c.ConsumerSpec, c.BatchSize, c.Faults, c.Trust = spec, e.Relay.BatchSize, f, trust
	return c, nil
}
