package main

import (
	"context"
	"fmt"

	"walletgl/internal/cli"
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/serve"
)

func serveCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, _, err := loadConfig("gl serve", args, env)
	if err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log, err := cfg.Log.Logger(env.Stderr, "gl")
	if err != nil {
		return err
	}
	pool, err := serve.OpenDatabase(ctx, cfg.DatabaseURL, "gl", log)
	if err != nil {
		return err
	}
	defer pool.Close()
	ledger := postgres.NewLedger(pool)
	if err := cfg.Rule.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	nc, err := events.Connect(ctx, cfg.Events.NATSURL, "gl", log)
	if err != nil {
		return err
	}
	defer nc.Close()

	fs, err := cfg.Events.FaultSet()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if fs != nil {
		log.Warn().Str("faults", cfg.Events.Faults).Msg("fault points armed")
	}
	topo := cfg.Events.Topology()
	poster := gl.NewTransferPoster(cfg.Rule, ledger, log)
	consumer, err := events.NewConsumer(cfg.Events.Consumer(events.ConsumerGL, events.SourceWallet, events.TypeTransferCompleted, fs),
		topo, nc, pool, poster, log)
	if err != nil {
		return err
	}
	// The GL's acknowledgments are done once the wallet's consumer acknowledged them.
	relayPool, err := database.OpenBookkeeping(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer relayPool.Close()
	relay, err := events.NewRelay(cfg.Events.Relay(events.SourceGL, events.ConsumerWallet, fs), topo, relayPool, nc, log)
	if err != nil {
		return err
	}
	handler := httpapi.NewServer(log, ledger, serve.Health(pool, nc))
	return serve.Run(ctx, cfg.HTTPAddr, handler, []serve.Worker{
		{Name: "transfer consumer", Run: consumer.Run},
		{Name: "acknowledgment relay", Run: relay.Run},
	}, log)
}

func migrateCmd(ctx context.Context, env cli.Env, args []string) error {
	cfg, _, err := loadConfig("gl migrate", args, env)
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
