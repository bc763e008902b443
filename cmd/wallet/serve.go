package main

import (
	"context"
	"fmt"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/events"
	"walletgl/internal/serve"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
)

func serveCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, _, err := service.Parse(env, args, nil)
	if err != nil {
		return err
	}
	log, err := cfg.Log.Logger(env.Stderr, "wallet")
	if err != nil {
		return err
	}
	// The wallet signs its TransferCompleted.v1 and accepts TransferPosted.v1 from the GL alone.
	keys, err := cfg.Events.EventKeys(events.SourceWallet, events.SourceGL, true, log)
	if err != nil {
		return err
	}
	deps, err := serve.Open(ctx, "wallet", cfg.DatabaseURL, cfg.Events, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	pool, fs := deps.Pool, deps.Faults
	relay, err := events.NewRelay(cfg.Events.Relay(events.SourceWallet, "", fs, keys.Signer), deps.Topology, deps.RelayPool, deps.NATS, log)
	if err != nil {
		return err
	}
	opts := postgres.Options{
		Batch: postgres.BatchConfig{MaxSize: cfg.BatchMax, Workers: cfg.BatchWorkers}, Log: log, Faults: fs,
	}
	if cfg.Events.PublishOnCommit {
		opts.PublishOnCommit = relay
	}
	store := postgres.NewStore(pool, opts)
	ackCfg, err := cfg.Events.Consumer(events.ConsumerWallet, fs, keys.Trust)
	if err != nil {
		return err
	}
	acks, err := events.NewConsumer(ackCfg, deps.Topology, deps.NATS, pool, postgres.NewAcknowledgments(), log)
	if err != nil {
		return err
	}
	apiKeys, guard, err := serve.Keys(pool, auth.WalletScopes, cfg.RateLimit, wallet.ErrUnavailable)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	handler := httpapi.NewServer(log, httpapi.Deps{
		Service: store, Admin: events.NewAdmin(pool), Guard: guard, Audit: apiKeys, Health: deps.Health(relay, acks),
	})
	workers := []serve.Worker{
		{Name: "relay", Run: relay.Run},
		{Name: "acknowledgment consumer", Run: acks.Run},
		{Name: "API key use", Run: apiKeys.Run},
	}
	if cfg.BatchWorkers > 0 {
		// Stopped after the HTTP server has drained, so every request it took is answered.
		workers = append(workers, serve.Worker{Name: "transfer batcher", Run: store.Run})
	}
	return serve.Run(ctx, cfg.Listen(), handler, workers, log)
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, _, err := service.Parse(env, args, nil)
	if err != nil {
		return err
	}
	log, err := cfg.Log.Logger(env.Stderr, "wallet")
	if err != nil {
		return err
	}
	pool, err := serve.OpenDatabase(ctx, cfg.DatabaseURL, "wallet", log)
	if err != nil {
		return err
	}
	pool.Close()
	return nil
}
