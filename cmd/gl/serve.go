package main

import (
	"context"
	"fmt"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/events"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/serve"
)

func serveCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	// The GL signs its TransferPosted.v1 and accepts TransferCompleted.v1 from the wallet alone.
	eventKeys, err := cfg.Events.EventKeys(events.SourceGL, events.SourceWallet, true, log)
	if err != nil {
		return err
	}
	deps, err := serve.Open(ctx, "gl", cfg.Postgres(), cfg.Events, cfg.Traces, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	ledger := postgres.NewLedger(deps.Pool)
	if err := cfg.Rule.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// The GL's acknowledgments are done once the wallet's consumer acknowledged them.
	relayCfg := cfg.Events.Relay(events.SourceGL, events.ConsumerWallet, deps.Faults, eventKeys.Signer)
	relayCfg.Metrics, relayCfg.Tracing = deps.Metrics.Relay, deps.Tracing
	relay, err := events.NewRelay(relayCfg, deps.Topology, deps.RelayPool, deps.NATS, log)
	if err != nil {
		return err
	}
	poster := gl.NewTransferPoster(cfg.Rule, ledger, log).WithMetrics(deps.Metrics.GL)
	if cfg.Events.PublishOnCommit {
		poster.PublishOnCommit(relay)
	}
	consCfg, err := cfg.Events.Consumer(events.ConsumerGL, deps.Faults, eventKeys.Trust)
	if err != nil {
		return err
	}
	consCfg.Metrics, consCfg.Tracing = deps.Metrics.Consumer, deps.Tracing
	consumer, err := events.NewConsumer(consCfg, deps.Topology, deps.NATS, deps.Pool, poster, log)
	if err != nil {
		return err
	}
	keys, guard, err := serve.Keys(deps.Pool, auth.GLScopes, cfg.RateLimit, gl.ErrUnavailable)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	handler := httpapi.NewServer(log, httpapi.Deps{
		Ledger: ledger, Guard: guard, Health: deps.Health(relay, consumer), Metrics: deps.Metrics, MetricsOnAPI: cfg.MetricsAddr == "",
		Tracing: deps.Tracing,
	})
	workers := []serve.Worker{
		{Name: "transfer consumer", Run: consumer.Run},
		{Name: "acknowledgment relay", Run: relay.Run},
		{Name: "API key use", Run: keys.Run},
	}
	if cfg.MetricsAddr != "" {
		workers = append(workers, serve.MetricsWorker(cfg.MetricsAddr, deps.Metrics, log))
	}
	return serve.Run(ctx, cfg.Listen(), handler, workers, log)
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, log, err := service.ParseLogged(env, args)
	if err != nil {
		return err
	}
	return serve.Migrate(ctx, cfg.Postgres(), "gl", log)
}
