package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/faults"
	"walletgl/internal/metrics"
	"walletgl/internal/problem"
	"walletgl/internal/tracing"
	"walletgl/internal/web"
)

// Deps is what both services open before wiring their own parts: the database (created and
// migrated when needed), the relay's bookkeeping pool, the NATS connection, the armed fault
// points, the JetStream topology and the TracerProvider.
type Deps struct {
	Service   string
	Pool      *pgxpool.Pool
	RelayPool *pgxpool.Pool
	NATS      *nats.Conn
	Faults    *faults.Set
	Topology  events.Topology
	Metrics   *metrics.Metrics
	// Tracing is the service's TracerProvider, built from the OTEL_* variables (off when no
	// endpoint is set); Close flushes it.
	Tracing *tracing.Provider
	log     zerolog.Logger
}

// Open opens the service's dependencies; Close releases them.
func Open(ctx context.Context, service string, db Database, ev Events, tr tracing.Config, log zerolog.Logger) (*Deps, error) {
	fs, err := ev.Faults.Set()
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if fs != nil {
		log.Warn().Str("faults", ev.Faults.Spec).Msg("fault points armed")
	}
	d := &Deps{Service: service, Faults: fs, Topology: ev.Topology.WithLog(log), Metrics: metrics.New(service), log: log}
	if d.Tracing, err = tracing.New(ctx, service, tr, log); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	if d.Pool, err = OpenDatabase(ctx, db, service, log); err != nil {
		return nil, err
	}
	if d.RelayPool, err = database.OpenBookkeeping(ctx, db.URL, database.BookkeepingMaxConns); err != nil {
		d.Close()
		return nil, err
	}
	d.Metrics.Pool("main", d.Pool)
	d.Metrics.Pool("relay", d.RelayPool)
	ops := admin.New(d.Pool)
	d.Metrics.Sample(ops.OutboxOpen)
	d.Metrics.SampleInbox(admin.HealthCap, ops.InboxFailed)
	if d.NATS, err = ev.Broker.Connect(ctx, service, service, log); err != nil {
		d.Close()
		return nil, err
	}
	if err := CheckTopology(ctx, d.NATS, d.Topology, service, log); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// topologyFixTimeout bounds serve's attempt to fix a topology that differs: a user without the
// rights gets no answer from the broker, only a permissions violation.
const topologyFixTimeout = 5 * time.Second

// CheckTopology compares the broker's streams and service's durable consumer with the
// configuration (events.Topology.Check). When they differ, it tries to create or update them
// (a user with the rights, as in development). When the broker refuses this NATS user the
// rights to read or change them, serve refuses to start with the differences and the command
// that fixes them. Any other failure (a broker not reachable yet, a cluster without a
// JetStream meta leader yet, a store too small for the streams) is the broker's state, not the
// service's configuration: serve starts and says so, and the relay and the consumer keep
// creating what is missing, logging each failure; /readyz answers 503 while the broker refuses
// the relay's streams.
func CheckTopology(ctx context.Context, nc *nats.Conn, topo events.Topology, service string, log zerolog.Logger) error {
	if !nc.IsConnected() {
		log.Warn().Msg("nats not reachable at start: the event topology is checked once it is")
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("check the event topology: %w", err)
	}
	diffs, err := topo.Check(ctx, js, service)
	if err != nil {
		if denied := permissionDenied(nc, err); denied != nil {
			return fmt.Errorf("check the event topology (the NATS user needs the INFO rights of docs/security.md): %w", denied)
		}
		log.Warn().Err(err).Msg("the event topology could not be checked at start: the relay and the consumer keep trying once the broker answers")
		return nil
	}
	if len(diffs) == 0 {
		return nil
	}
	fixCtx, cancel := context.WithTimeout(ctx, topologyFixTimeout)
	defer cancel()
	applied, err := topo.Setup(fixCtx, js, service)
	if err != nil {
		if denied := permissionDenied(nc, err); denied != nil {
			return fmt.Errorf("the broker's event topology differs from the configuration (%s) and this NATS user may not change it (%w): run `%s events setup` with an operator's NATS credentials (docs/operations.md)",
				events.Differences(diffs), denied, service)
		}
		log.Warn().Err(err).Str("differences", events.Differences(diffs)).
			Msg("the broker's event topology differs from the configuration and could not be set up at start: the relay and the consumer keep trying")
		return nil
	}
	for _, a := range applied {
		if a.Action != events.ActionUnchanged {
			log.Info().Str("kind", a.Kind).Str("name", a.Name).Str("action", a.Action).Msg("event topology set up at start")
		}
	}
	return nil
}

// permissionDenied returns the permissions violation behind err, nil when there was none. A
// JetStream request on a subject the user may not publish to gets no answer, only a timeout:
// the broker's refusal reaches the connection, as its last error.
func permissionDenied(nc *nats.Conn, err error) error {
	if errors.Is(err, nats.ErrPermissionViolation) {
		return err
	}
	if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) {
		return fmt.Errorf("%w (%w)", last, err)
	}
	return nil
}

// Health is what the service needs to do its work (see Health), and its event loops: a relay
// or consumer wedged in a round, or a broker refusing the relay's publishes, is unhealthy.
// Two warnings leave it healthy: events recorded unauthenticated lately (whoever publishes
// them must not decide the service's health), and signing turned off.
func (d *Deps) Health(relay *outbox.Relay, consumer *inbox.Consumer) []web.Check {
	return append(Health(d.Pool, d.NATS),
		web.Check{Name: "migrations", Func: func(ctx context.Context) error { return database.MigrationsCurrent(ctx, d.Pool, d.Service) }},
		web.Check{Name: "relay", Func: func(context.Context) error { return relay.Health() }},
		web.Check{Name: "consumer", Func: func(context.Context) error { return consumer.Health() }},
		web.Check{Name: "unauthenticated_events", Warn: true, Func: consumer.Unauthenticated},
		web.Check{Name: "event_signing", Warn: true, Func: func(context.Context) error { return errors.Join(relay.Unsigned(), consumer.Unverified()) }},
	)
}

// Keys returns the service's API keys and the guard of its HTTP API, which allows each key
// rateLimit and each client address failureLimit failed authentications (RATE[:BURST],
// auth.ParseRateLimit) and answers unavailable when the database is away. There is no setting
// that turns it off.
func Keys(pool *pgxpool.Pool, scopes []auth.Scope, rateLimit, failureLimit string, unavailable *problem.Error) (*auth.Keys, *auth.Guard, error) {
	limit, err := auth.ParseRateLimit(rateLimit)
	if err != nil {
		return nil, nil, err
	}
	failures, err := auth.ParseRateLimit(failureLimit)
	if err != nil {
		return nil, nil, err
	}
	keys := auth.NewKeys(pool, scopes)
	return keys, auth.NewGuard(keys, limit, unavailable).LimitFailures(failures), nil
}

// tracingFlushTimeout bounds how long Close waits for the last spans to be exported.
const tracingFlushTimeout = 5 * time.Second

// Close closes what Open opened, and exports the spans still buffered: it runs after the
// service's workers stopped, when every span has ended.
func (d *Deps) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
	defer cancel()
	if err := d.Tracing.Shutdown(ctx); err != nil {
		d.log.Warn().Err(err).Msg("spans not exported at shutdown")
	}
	if d.NATS != nil {
		d.NATS.Close()
	}
	if d.RelayPool != nil {
		d.RelayPool.Close()
	}
	if d.Pool != nil {
		d.Pool.Close()
	}
}

// BrokerPageTimeout bounds how long the console's broker page waits for the broker.
const BrokerPageTimeout = 2 * time.Second

// BrokerPage reads the broker for the console's broker page on the service's own connection,
// as the status command reads it on the operator's (events.Topology.ReadBroker).
func BrokerPage(d *Deps) func(ctx context.Context) events.BrokerStatus {
	return func(ctx context.Context) events.BrokerStatus {
		return d.Topology.ReadBroker(ctx, d.NATS, d.Service, events.RedactURL(d.NATS.ConnectedUrlRedacted()), BrokerPageTimeout)
	}
}
