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
	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
	"walletgl/internal/logging"
	"walletgl/internal/serve"
	"walletgl/internal/tracing"
)

// service is the GL as its commands see it: its settings, the handler of its inbox (the
// posting of transfers) and its invariants.
var service = cli.Service[*Config]{
	Name: "gl", Consumer: events.ConsumerGL, Scopes: auth.GLScopes,
	SettingsFunc:     func() *Config { return new(Config) },
	InboxHandlerFunc: transferPoster,
	VerifyFunc:       verifyChecks,
	EventsFunc:       func(c *Config) serve.Events { return c.Events },
}

// maxCheckpointLines bounds GL_CHECKPOINT_LINES: the trial balance sums every line after the
// latest checkpoint (3,000 in about 2 ms in the bench), so a million would take it, at that
// pace, about two thirds of a second.
const maxCheckpointLines = 1_000_000

// minReadMaxStaleness is GL_READ_MAX_STALENESS's floor: the primary is sampled every tenth of
// the bound, at least every 50ms, and a bound below its coarseness would send every read to
// the primary.
const minReadMaxStaleness = 500 * time.Millisecond

// checkReadDatabase checks that the read URL parses and names the database GL_DATABASE_URL
// names: a replica of another database would answer with another ledger.
func checkReadDatabase(readURL, primaryURL string) error {
	read, err := database.IdentityOf(readURL)
	if err != nil {
		return err
	}
	primary, err := database.IdentityOf(primaryURL)
	if err != nil {
		return nil // GL_DATABASE_URL's own check reports it
	}
	if read.Database != primary.Database {
		return fmt.Errorf("names database %q and GL_DATABASE_URL database %q: they must name the same one", read.Database, primary.Database)
	}
	return nil
}

// Config is every setting of the GL service.
type Config struct {
	serve.Settings
	Rule   gl.PostingRule
	Events serve.Events
	Log    logging.Config
	// Checkpoints is when serve takes a balance checkpoint (GL_CHECKPOINT_INTERVAL,
	// GL_CHECKPOINT_LINES) and how long it keeps every one (GL_CHECKPOINT_RETENTION).
	Checkpoints postgres.CheckpointPolicy
	Traces      tracing.Config // the standard OTEL_* variables: where traces go, if anywhere
	// ReadDatabaseURL is where the ledger's HTTP reads go (a replica; "": the primary), while it
	// is at most ReadMaxStaleness behind GL_DATABASE_URL's primary.
	ReadDatabaseURL  string
	ReadMaxStaleness time.Duration
}

// Bind binds every setting to c: the environment variable, and the flag that overrides it.
func (c *Config) Bind(s *config.Set) {
	serve.BindSettings(s, &c.Settings, "GL", "gl", "127.0.0.1:8081")
	s.String(&c.Rule.DebitAccount, "GL_TRANSFER_DEBIT_ACCOUNT", "transfer-debit-account", gl.DefaultPostingRule.DebitAccount,
		"the debit account the posting rule in force for TransferCompleted.v1 (kind unspecified) must have; checked at start, set with gl rules set")
	s.String(&c.Rule.CreditAccount, "GL_TRANSFER_CREDIT_ACCOUNT", "transfer-credit-account", gl.DefaultPostingRule.CreditAccount,
		"the credit account the posting rule in force for TransferCompleted.v1 (kind unspecified) must have; checked at start, set with gl rules set")
	s.Duration(&c.Checkpoints.Interval, "GL_CHECKPOINT_INTERVAL", "checkpoint-interval", postgres.DefaultCheckpointInterval,
		"the longest serve goes without totalling every account's balance up to now (a balance checkpoint) while lines are posted; reads add only the lines after the latest")
	s.Int64(&c.Checkpoints.Lines, "GL_CHECKPOINT_LINES", "checkpoint-lines", postgres.DefaultCheckpointLines,
		"serve takes a balance checkpoint, at most once a second, as soon as this many lines (and 20 for each account and currency) were posted after the latest")
	s.Duration(&c.Checkpoints.Retention, "GL_CHECKPOINT_RETENTION", "checkpoint-retention", postgres.DefaultCheckpointRetention,
		"serve keeps every balance checkpoint this long, then only the last of each day (UTC), which reads as of an older time start from; 0 keeps every one")
	s.String(&c.ReadDatabaseURL, "GL_READ_DATABASE_URL", "read-database-url", "",
		"the database the ledger's HTTP reads and console pages go to, typically the standbys in a multi-host URL with target_session_attrs=prefer-standby; "+
			"writes, the consumer and the relay stay on GL_DATABASE_URL (empty: every read on GL_DATABASE_URL)")
	s.Duration(&c.ReadMaxStaleness, "GL_READ_MAX_STALENESS", "read-max-staleness", database.DefaultReplicaMaxStaleness,
		"the most a read from GL_READ_DATABASE_URL may be behind the primary; a read whose replica is further behind is served by the primary")
	c.Events.Bind(s)
	c.Log.Bind(s)
	c.Traces.Bind(s)
}

// Logging is what the commands both binaries share read of the logging settings.
func (c *Config) Logging() logging.Config { return c.Log }

// Validate reports every setting out of range.
func (c *Config) Validate() error {
	var errs []error
	if c.Rule.DebitAccount == "" || c.Rule.CreditAccount == "" {
		errs = append(errs, errors.New("GL_TRANSFER_DEBIT_ACCOUNT and GL_TRANSFER_CREDIT_ACCOUNT must be set"))
	}
	if c.Checkpoints.Interval < time.Second || c.Checkpoints.Interval > time.Hour {
		errs = append(errs, fmt.Errorf("GL_CHECKPOINT_INTERVAL %s: want 1s to 1h", c.Checkpoints.Interval))
	}
	if c.Checkpoints.Retention != 0 && c.Checkpoints.Retention < c.Checkpoints.Interval {
		errs = append(errs, fmt.Errorf("GL_CHECKPOINT_RETENTION %s: want 0 (keep every checkpoint) or at least GL_CHECKPOINT_INTERVAL (%s)",
			c.Checkpoints.Retention, c.Checkpoints.Interval))
	}
	if c.Checkpoints.Lines < 1 || c.Checkpoints.Lines > maxCheckpointLines {
		errs = append(errs, fmt.Errorf("GL_CHECKPOINT_LINES %d: want 1 to %d", c.Checkpoints.Lines, maxCheckpointLines))
	}
	if c.ReadMaxStaleness < minReadMaxStaleness || c.ReadMaxStaleness > time.Hour {
		errs = append(errs, fmt.Errorf("GL_READ_MAX_STALENESS %s: want %s to 1h", c.ReadMaxStaleness, minReadMaxStaleness))
	}
	if c.ReadDatabaseURL != "" {
		if err := checkReadDatabase(c.ReadDatabaseURL, c.DatabaseURL); err != nil {
			errs = append(errs, fmt.Errorf("GL_READ_DATABASE_URL: %w", err))
		}
	}
	return errors.Join(append(errs, c.Settings.Validate(), c.Events.Validate(), c.Traces.Validate())...)
}

// transferPoster is the handler gl inbox retry posts failed events with, as serve's consumer
// does: the ledger's posting rules, checked against the configured rule.
func transferPoster(ctx context.Context, cfg *Config, pool *pgxpool.Pool, log zerolog.Logger) (inbox.Handler, error) {
	ledger := postgres.NewLedger(pool)
	if err := checkRules(ctx, cfg, ledger); err != nil {
		return nil, err
	}
	return posting.New(ledger, log), nil
}

// checkConfiguredRule keeps the promise of GL_TRANSFER_DEBIT_ACCOUNT and
// GL_TRANSFER_CREDIT_ACCOUNT now that the posting rules are data (gl rules): they name the
// accounts the rule in force for TransferCompleted.v1 (kind unspecified) has, and a GL whose
// table says otherwise refuses to start rather than post by other accounts than its operator
// configured. The table decides; the operator changes it with gl rules set.
func checkConfiguredRule(ctx context.Context, configured gl.PostingRule, ledger *postgres.Ledger) error {
	if err := configured.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	rules, err := ledger.Rules(ctx)
	if err != nil {
		return err
	}
	// The rule in force now, not one scheduled for later: a change effective next month must
	// not stop a restart today.
	rule, ok := rules.At(contract.TypeTransferCompleted, contract.KindUnspecified, "", time.Now())
	if !ok {
		return fmt.Errorf("configuration: no posting rule for %s kind %s (gl rules list)", contract.TypeTransferCompleted, contract.KindUnspecified)
	}
	if rule.PostingRule != configured {
		return fmt.Errorf("configuration: GL_TRANSFER_DEBIT_ACCOUNT/GL_TRANSFER_CREDIT_ACCOUNT say debit %s credit %s, "+
			"but the posting rules say debit %s credit %s for %s kind %s (effective %s): the rules table decides how events are posted; "+
			"change it with 'gl rules set --event-type %s --kind %s --debit %s --credit %s', or set these two variables to %s and %s",
			configured.DebitAccount, configured.CreditAccount, rule.DebitAccount, rule.CreditAccount,
			contract.TypeTransferCompleted, contract.KindUnspecified, effectiveString(rule.EffectiveFrom),
			contract.TypeTransferCompleted, contract.KindUnspecified, configured.DebitAccount, configured.CreditAccount,
			rule.DebitAccount, rule.CreditAccount)
	}
	return nil
}

// checkRules checks the transfer posting rule and the hold rules (gl.DefaultHoldRules) against
// the chart of accounts, before any event is posted.
func checkRules(ctx context.Context, cfg *Config, ledger *postgres.Ledger) error {
	if err := checkConfiguredRule(ctx, cfg.Rule, ledger); err != nil {
		return err
	}
	if err := gl.DefaultHoldRules.Check(ctx, ledger); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// verifyChecks runs the ledger's invariant checks (gl verify). They only read: the database is
// neither created nor migrated, so a wrong URL fails instead of creating one.
func verifyChecks(ctx context.Context, cfg *Config, pool *pgxpool.Pool) ([]cli.Check, error) {
	checks, err := postgres.NewLedger(pool).Verify(ctx, cfg.Events.Consumer.InboxRetention)
	if err != nil {
		return nil, err
	}
	out := make([]cli.Check, 0, len(checks))
	for _, c := range checks {
		out = append(out, cli.NewCheck(c.Name, "", c.Checked, c.Failures, c.Offenders))
	}
	return out, nil
}
