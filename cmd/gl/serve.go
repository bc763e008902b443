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
	cfg, _, err := service.Parse(env, args, nil)
	if err != nil {
		return err
	}
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return err
	}
	// The GL signs its TransferPosted.v1 and accepts TransferCompleted.v1 from the wallet alone.
	keys, err := cfg.Events.EventKeys(events.SourceGL, events.SourceWallet, true, log)
	if err != nil {
		return err
	}
	deps, err := serve.Open(ctx, "gl", cfg.DatabaseURL, cfg.Events, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	ledger := postgres.NewLedger(deps.Pool)
	if err := cfg.Rule.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	// The GL's acknowledgments are done once the wallet's consumer acknowledged them.
	relay, err := events.NewRelay(cfg.Events.Relay(events.SourceGL, events.ConsumerWallet, deps.Faults, keys.Signer),
		deps.Topology, deps.RelayPool, deps.NATS, log)
	if err != nil {
		return err
	}
	poster := gl.NewTransferPoster(cfg.Rule, ledger, log)
	if cfg.Events.PublishOnCommit {
		poster.PublishOnCommit(relay)
	}
	consCfg, err := cfg.Events.Consumer(events.ConsumerGL, deps.Faults, keys.Trust)
	if err != nil {
		return err
	}
	consumer, err := events.NewConsumer(consCfg, deps.Topology, deps.NATS, deps.Pool, poster, log)
	if err != nil {
		return err
	}
	apiKeys, guard, err := serve.Keys(deps.Pool, auth.GLScopes, cfg.RateLimit, gl.ErrUnavailable)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	handler := httpapi.NewServer(log, ledger, guard, deps.Health(relay, consumer))
	return serve.Run(ctx, cfg.Listen(), handler, []serve.Worker{
		{Name: "transfer consumer", Run: consumer.Run},
		{Name: "acknowledgment relay", Run: relay.Run},
		{Name: "API key use", Run: apiKeys.Run},
	}, log)
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, _, err := service.Parse(env, args, nil)
	if err != nil {
		return err
	}
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return err
	}
	pool, err := serve.OpenDatabase(ctx, cfg.DatabaseURL, "gl", log)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}
