package main

import (
	"context"
	"fmt"
	"slices"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/console"
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
	"walletgl/internal/serve"
	"walletgl/internal/web"
)

func serveCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	// The GL signs its TransferPosted.v2 and accepts TransferCompleted.v1 from the wallet alone.
	eventKeys, err := cfg.Events.Signing.Keys(contract.SourceGL, contract.SourceWallet, true, log)
	if err != nil {
		return err
	}
	deps, err := serve.Open(ctx, "gl", cfg.Postgres(), cfg.Events, cfg.Traces, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	ledger := postgres.NewLedger(deps.Pool)
	if err := checkRules(ctx, cfg, ledger); err != nil {
		return err
	}
	// The GL's acknowledgments are done once the wallet's consumer acknowledged them.
	relayCfg := cfg.Events.RelayFor(contract.SourceGL, events.ConsumerWallet, deps.Faults, eventKeys.Signer)
	relayCfg.Metrics, relayCfg.Tracing = deps.Metrics.Relay, deps.Tracing
	relay, err := outbox.NewRelay(relayCfg, deps.Topology, deps.RelayPool, deps.NATS, log)
	if err != nil {
		return err
	}
	poster := posting.New(ledger, log).WithMetrics(deps.Metrics.GL)
	if cfg.Events.Relay.PublishOnCommit {
		poster.PublishOnCommit(relay)
	}
	consCfg, err := cfg.Events.ConsumerFor(events.ConsumerGL, deps.Faults, eventKeys.Trust)
	if err != nil {
		return err
	}
	consCfg.Metrics, consCfg.Tracing = deps.Metrics.Consumer, deps.Tracing
	consumer, err := inbox.NewConsumer(consCfg, deps.Topology, deps.NATS, deps.Pool, poster, log)
	if err != nil {
		return err
	}
	keys, guard, err := serve.Keys(deps.Pool, auth.GLScopes, cfg.RateLimit, cfg.AuthFailureLimit, gl.ErrUnavailable)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	health := deps.Health(relay, consumer)
	var replica *httpapi.Replica
	var replicaWorkers []serve.Worker
	if cfg.ReadDatabaseURL != "" {
		readPool, err := database.Open(ctx, cfg.ReadDatabaseURL, database.ServiceMaxConns)
		if err != nil {
			return fmt.Errorf("open GL_READ_DATABASE_URL: %w", err)
		}
		defer readPool.Close()
		deps.Metrics.Pool("read", readPool)
		measure := database.NewReplica(deps.Pool, readPool, cfg.ReadMaxStaleness)
		replica = &httpapi.Replica{Ledger: postgres.NewLedger(readPool), FreshnessFunc: measure.Staleness}
		health = append(health, web.Check{Name: "read_replica", Warn: true, Func: measure.Health})
		replicaWorkers = append(replicaWorkers, serve.Worker{Name: "replica staleness", Run: measure.Run})
		log.Info().Dur("max_staleness", cfg.ReadMaxStaleness).Msg("ledger reads go to GL_READ_DATABASE_URL while it is within the bound")
	}
	cons, err := glConsole(deps, httpapi.Routed(ledger, replica), poster, guard, keys, relay.MaxAttempts())
	if err != nil {
		return err
	}
	handler := httpapi.NewServer(log, httpapi.Deps{
		Ledger: ledger, Replica: replica, Adjustments: ledger.WithAudit(httpapi.AuditByKey), Inbox: deps.Pool, Guard: guard, Health: health,
		Metrics: deps.Metrics, MetricsOnAPI: cfg.MetricsAddr == "",
		Console: cons, Tracing: deps.Tracing,
	})
	workers := []serve.Worker{
		{Name: "console sessions", Run: cons.Run},
		{Name: "transfer consumer", Run: consumer.Run},
		{Name: "acknowledgment relay", Run: relay.Run},
		{Name: "API key use", Run: keys.Run},
		{Name: "balance checkpoints", Run: func(ctx context.Context) error {
			return ledger.RunCheckpoints(ctx, cfg.Checkpoints, log)
		}},
	}
	workers = append(workers, replicaWorkers...)
	if cfg.MetricsAddr != "" {
		workers = append(workers, serve.MetricsWorker(cfg.MetricsAddr, deps.Metrics, log))
	}
	return serve.Run(ctx, cfg.Listen(), handler, workers, log)
}

// glConsole is the GL's operator console: its inbox (retry with the consumer's own poster), its
// outbox of acknowledgments (to look at), and the ledger's reads.
func glConsole(deps *serve.Deps, ledger httpapi.Ledger, poster inbox.Handler, guard *auth.Guard, keys *auth.Keys, maxAttempts int) (*console.Console, error) {
	in := inbox.New(events.ConsumerGL, poster)
	ops := admin.New(deps.Pool)
	ev := console.Events{
		Admin: ops, Audit: keys,
		Retry: func(ctx context.Context, ids ...string) []inbox.Retried { return in.Retry(ctx, deps.Pool, ids...) },
		Resolve: func(ctx context.Context, by, resolution string, ids []string) (admin.Resolved, error) {
			return admin.ResolveInboxAudited(ctx, deps.Pool, httpapi.AuditByKey, by, resolution, "console", ids...)
		},
		Broker: serve.BrokerPage(deps),
		View:   httpapi.ScopeLedgerRead, RetryScope: httpapi.ScopeInboxAdmin, MaxAttempts: maxAttempts,
	}
	books := httpapi.Books{Ledger: ledger, Scope: httpapi.ScopeLedgerRead}
	return console.New(console.Config{Service: "gl", Guard: guard, Metrics: deps.Metrics, Pages: slices.Concat(ev.Pages(), books.Pages()), Health: ops.Health})
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	return serve.Migrate(ctx, cfg.Postgres(), "gl", log)
}
