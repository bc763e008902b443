package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/cli"
	"walletgl/internal/config"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/logging"
	"walletgl/internal/serve"
	"walletgl/internal/tracing"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// service is the wallet as its commands see it: its settings, the handler of its inbox (the
// GL's acknowledgments) and its invariants.
var service = cli.Service[*Config]{
	Name: "wallet", Consumer: events.ConsumerWallet, Scopes: auth.WalletScopes,
	SettingsFunc: func() *Config { return new(Config) },
	InboxHandlerFunc: func(context.Context, *Config, *pgxpool.Pool, zerolog.Logger) (inbox.Handler, error) {
		return postgres.NewAcknowledgments(), nil
	},
	VerifyFunc: verifyChecks,
	EventsFunc: func(c *Config) serve.Events { return c.Events },
}

// Config is every setting of the wallet service.
type Config struct {
	serve.Settings
	GLURL    string // the GL's HTTP API, asked by wallet outbox reconcile
	GLAPIKey string // its API key (ledger:read)
	// Group commit of transfers: the most requests per transaction, and how many such
	// transactions may be committing at once (0: a transaction per request, no batching).
	BatchMax     int
	BatchWorkers int
	// TransferEventVersion is the version of TransferCompleted the wallet publishes: 2 (kind
	// and reference), or 1 while a GL older than TransferCompleted.v2 is still deployed (then
	// only the deposits, which v1 carries exactly: contract.TransferEventTypeFor).
	TransferEventVersion int
	// How often serve voids the holds whose expiry has passed.
	HoldExpiryInterval time.Duration
	Events             serve.Events
	Log                logging.Config
	Traces             tracing.Config // the standard OTEL_* variables: where traces go, if anywhere
}

// Bind binds every setting to c: the environment variable, and the flag that overrides it.
func (c *Config) Bind(s *config.Set) {
	serve.BindSettings(s, &c.Settings, "WALLET", "wallet", "127.0.0.1:8080")
	s.String(&c.GLURL, "GL_URL", "gl-url", "http://127.0.0.1:8081", "the GL's HTTP API, which wallet outbox reconcile asks what it posted")
	s.Secret(&c.GLAPIKey, "GL_API_KEY", "an API key of the GL with ledger:read, sent by wallet outbox reconcile")
	s.Int(&c.BatchMax, "WALLET_BATCH_MAX", "batch-max", postgres.DefaultBatchMaxSize, "most transfer requests committed in one transaction")
	s.Int(&c.BatchWorkers, "WALLET_BATCH_WORKERS", "batch-workers", postgres.DefaultBatchWorkers, fmt.Sprintf("most transfer batches committing at once (a second starts only when %d requests wait or one has waited %s); 0 gives each request a transaction of its own",
		postgres.DefaultBatchSplitAt, postgres.DefaultBatchSplitAfter))
	s.Int(&c.TransferEventVersion, "WALLET_TRANSFER_EVENT_VERSION", "transfer-event-version", 2,
		"version of TransferCompleted published: 2 (kind and reference), or 1 until every GL accepts v2 (docs/operations.md, upgrade order); with 1 only deposits go as v1, other kinds as v2")
	s.Duration(&c.HoldExpiryInterval, "WALLET_HOLD_EXPIRY_INTERVAL", "hold-expiry-interval", postgres.DefaultHoldExpiryInterval, "how often serve voids the pending holds whose expiry has passed")
	c.Events.Bind(s)
	c.Log.Bind(s)
	c.Traces.Bind(s)
}

// Logging is what the commands both binaries share read of the logging settings.
func (c *Config) Logging() logging.Config { return c.Log }

// Validate reports every setting out of range.
func (c *Config) Validate() error {
	var errs []error
	if c.BatchMax < 1 {
		errs = append(errs, fmt.Errorf("WALLET_BATCH_MAX must be at least 1, got %d", c.BatchMax))
	}
	if c.HoldExpiryInterval <= 0 {
		errs = append(errs, fmt.Errorf("WALLET_HOLD_EXPIRY_INTERVAL must be positive, got %s", c.HoldExpiryInterval))
	}
	if c.BatchWorkers < 0 {
		errs = append(errs, fmt.Errorf("WALLET_BATCH_WORKERS must be 0 or more, got %d", c.BatchWorkers))
	}
	if _, err := c.transferEventType(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, c.Settings.Validate(), c.Events.Validate(), c.Traces.Validate())...)
}

// verifyChecks runs the wallet's invariant checks (wallet verify).
func verifyChecks(ctx context.Context, cfg *Config, pool *pgxpool.Pool) ([]cli.Check, error) {
	checks, err := postgres.Verify(ctx, pool, wallet.VerifyOptions{Retention: cfg.Events.Relay.Retention})
	if err != nil {
		return nil, err
	}
	out := make([]cli.Check, 0, len(checks))
	for _, c := range checks {
		out = append(out, cli.NewCheck(c.Name, c.Unit, c.Checked, c.Failed, c.Sample))
	}
	return out, nil
}

// transferEventType is the event type WALLET_TRANSFER_EVENT_VERSION names.
func (c *Config) transferEventType() (string, error) {
	switch c.TransferEventVersion {
	case 1:
		return contract.TypeTransferCompleted, nil
	case 2:
		return contract.TypeTransferCompletedV2, nil
	}
	return "", fmt.Errorf("WALLET_TRANSFER_EVENT_VERSION must be 1 or 2, got %d", c.TransferEventVersion)
}
