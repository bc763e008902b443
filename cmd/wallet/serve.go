package main

import (
	"context"
	"fmt"
	"slices"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/console"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/serve"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/glapi"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
)

func serveCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	// The wallet signs its TransferCompleted (v2, or v1) and accepts TransferPosted.v2 (and .v1) from the GL alone.
	eventKeys, err := cfg.Events.Signing.Keys(contract.SourceWallet, contract.SourceGL, true, log)
	if err != nil {
		return err
	}
	deps, err := serve.Open(ctx, "wallet", cfg.Postgres(), cfg.Events, cfg.Traces, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	pool, fs := deps.Pool, deps.Faults
	relayCfg := cfg.Events.RelayFor(contract.SourceWallet, "", fs, eventKeys.Signer)
	relayCfg.Metrics, relayCfg.Tracing = deps.Metrics.Relay, deps.Tracing
	relay, err := outbox.NewRelay(relayCfg, deps.Topology, deps.RelayPool, deps.NATS, log)
	if err != nil {
		return err
	}
	eventType, err := cfg.transferEventType()
	if err != nil {
		return err
	}
	opts := postgres.Options{
		TransferEventType: eventType,
		Batch:             postgres.BatchConfig{MaxSize: cfg.BatchMax, Workers: cfg.BatchWorkers}, Log: log, Faults: fs,
		Metrics: deps.Metrics.Wallet, Tracer: deps.Tracing.Tracer("walletgl/internal/wallet/postgres"),
		Audit: httpapi.AuditByKey, // the API key of the request that changes limits or forces a reversal
	}
	if cfg.Events.Relay.PublishOnCommit {
		opts.PublishOnCommit = relay
	}
	store := postgres.NewStore(pool, opts)
	ackCfg, err := cfg.Events.ConsumerFor(events.ConsumerWallet, fs, eventKeys.Trust)
	if err != nil {
		return err
	}
	ackCfg.Metrics, ackCfg.Tracing = deps.Metrics.Consumer, deps.Tracing
	acks, err := inbox.NewConsumer(ackCfg, deps.Topology, deps.NATS, pool, postgres.NewRelayAcknowledgments(relay), log)
	if err != nil {
		return err
	}
	keys, guard, err := serve.Keys(pool, auth.WalletScopes, cfg.RateLimit, cfg.AuthFailureLimit, wallet.ErrUnavailable)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	cons, err := walletConsole(cfg, deps, store, guard, keys, relay.MaxAttempts())
	if err != nil {
		return err
	}
	handler := httpapi.NewServer(log, httpapi.Deps{
		Service: store, Admin: admin.New(pool), Guard: guard, Audit: keys, Health: deps.Health(relay, acks),
		Metrics: deps.Metrics, MetricsOnAPI: cfg.MetricsAddr == "", Console: cons, Tracing: deps.Tracing,
	})
	workers := []serve.Worker{
		{Name: "console sessions", Run: cons.Run},
		{Name: "relay", Run: relay.Run},
		{Name: "acknowledgment consumer", Run: acks.Run},
		{Name: "API key use", Run: keys.Run},
		{Name: "hold expiry", Run: postgres.NewHoldExpiry(store, postgres.HoldExpiryConfig{Interval: cfg.HoldExpiryInterval, Log: log}).Run},
	}
	if cfg.MetricsAddr != "" {
		workers = append(workers, serve.MetricsWorker(cfg.MetricsAddr, deps.Metrics, log))
	}
	if cfg.BatchWorkers > 0 {
		// Stopped after the HTTP server has drained, so every request it took is answered.
		workers = append(workers, serve.Worker{Name: "transfer batcher", Run: store.Run})
	}
	return serve.Run(ctx, cfg.Listen(), handler, workers, log)
}

// walletConsole is the wallet's operator console: its outbox and inbox (requeue, retry), and
// its transfers traced through the GL's API (GL_URL, GL_API_KEY), whose metrics also give the
// pipeline header its commit → posted latency and the GL's rows that need a look.
func walletConsole(cfg *Config, deps *serve.Deps, store *postgres.Store, guard *auth.Guard, keys *auth.Keys, maxAttempts int) (*console.Console, error) {
	glAPI := glapi.New(cfg.GLURL, cfg.GLAPIKey)
	in := inbox.New(events.ConsumerWallet, postgres.NewAcknowledgments())
	ops := admin.New(deps.Pool)
	ev := console.Events{
		Admin: ops, Audit: keys,
		Retry: func(ctx context.Context, ids ...string) []inbox.Retried { return in.Retry(ctx, deps.Pool, ids...) },
		Resolve: func(ctx context.Context, by, resolution string, ids []string) (admin.Resolved, error) {
			return admin.ResolveInboxAudited(ctx, deps.Pool, httpapi.AuditByKey, by, resolution, "console", ids...)
		},
		Broker: serve.BrokerPage(deps),
		View:   httpapi.ScopeOutboxAdmin, Requeue: httpapi.ScopeOutboxAdmin, RetryScope: httpapi.ScopeInboxAdmin,
		MaxAttempts: maxAttempts, TracePath: "/console/transfers/",
	}
	trace := httpapi.Trace{Transfers: store, Admin: ops, GL: glAPI, Stream: deps.Topology.StreamName(contract.SourceWallet), Scope: httpapi.ScopeTransfersRead,
		Requeue: httpapi.ScopeOutboxAdmin, MaxAttempts: maxAttempts}
	return console.New(console.Config{
		Service: "wallet", Guard: guard, Metrics: deps.Metrics, Pages: slices.Concat(ev.Pages(), trace.Pages()),
		RemoteTotals: glAPI.Totals, Health: ops.Health, Remote: &console.Remote{Name: "GL", URL: cfg.GLURL},
	})
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	return serve.Migrate(ctx, cfg.Postgres(), "wallet", log)
}
