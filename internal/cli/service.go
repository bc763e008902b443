package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/config"
	"walletgl/internal/events/inbox"
	"walletgl/internal/serve"
)

// Service is a binary as its commands see it: how its settings are made, and what the commands
// both binaries have (outbox, inbox, verify, status) need of it.
type Service[S Settings] struct {
	Name     string       // the program and the log's service field: "wallet", "gl"
	Consumer string       // the consumer its inbox belongs to: events.ConsumerWallet, events.ConsumerGL
	Scopes   []auth.Scope // the scopes its API keys may hold: auth.WalletScopes, auth.GLScopes

	// SettingsFunc returns new, unbound settings (a new(Config)).
	SettingsFunc func() S
	// InboxHandlerFunc returns the handler inbox retry applies failed events with: the one serve
	// gives the service's consumer.
	InboxHandlerFunc func(ctx context.Context, s S, pool *pgxpool.Pool, log zerolog.Logger) (inbox.Handler, error)
	// VerifyFunc runs the service's invariant checks for verify.
	VerifyFunc func(ctx context.Context, s S, pool *pgxpool.Pool) ([]Check, error)
	// EventsFunc returns the event settings of s: status asks the broker with them.
	EventsFunc func(s S) serve.Events
}

// Parse reads the command line into new settings of the service and the command's own flags
// (own, as for Parse); it returns the settings and the positional arguments.
func (svc Service[S]) Parse(env Env, args []string, own func(s *config.Set)) (S, []string, error) {
	s := svc.SettingsFunc()
	rest, err := Parse(env, s, own, args)
	return s, rest, err
}

// ParseLogged reads a command line that takes no flags of its own (serve, migrate) into new
// settings of the service, and returns them with the service's logger.
func (svc Service[S]) ParseLogged(env Env, args []string) (S, zerolog.Logger, error) {
	s, _, err := svc.Parse(env, args, nil)
	if err != nil {
		return s, zerolog.Nop(), err
	}
	log, err := s.Logging().Logger(env.Stderr, svc.Name)
	return s, log, err
}

// Call is one run of a command on the service's database (Service.Run).
type Call[S Settings] struct {
	Settings S
	Args     []string      // the positional arguments
	Pool     *pgxpool.Pool // the service's database, opened with the command's access
	JSON     bool          // --json: print for scripts
}

// Run reads the command line (--json, own's flags and the service's settings), opens the
// service's database with access (AsOwner: with the owner's URL when one is set) and runs fn on
// it.
func (svc Service[S]) Run(ctx context.Context, env Env, args []string, access Access, own func(s *config.Set), fn func(c Call[S]) error) error {
	var c Call[S]
	var err error
	c.Settings, c.Args, err = svc.Parse(env, args, func(s *config.Set) {
		JSONFlag(s, &c.JSON)
		if own != nil {
			own(s)
		}
	})
	if err != nil {
		return err
	}
	dbURL := c.Settings.Database()
	if owner := c.Settings.OwnerDatabase(); access == AsOwner && owner != "" {
		dbURL = owner
	}
	if c.Pool, err = OpenDatabase(ctx, dbURL, access); err != nil {
		return err
	}
	defer c.Pool.Close()
	err = fn(c)
	if access == AsOwner && c.Settings.OwnerDatabase() == "" && isPermissionDenied(err) {
		return fmt.Errorf("%w (this command writes as the database's owner: set %s_MIGRATE_DATABASE_URL)", err, strings.ToUpper(svc.Name))
	}
	return err
}

// isPermissionDenied reports whether PostgreSQL refused a statement for lack of a privilege.
func isPermissionDenied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501" // insufficient_privilege
}

// Verify is the verify command: the service's checks on its database, read-only, printed by
// WriteVerification.
func (svc Service[S]) Verify(ctx context.Context, env Env, args []string) error {
	return svc.Run(ctx, env, args, ReadOnly, nil, func(c Call[S]) error {
		checks, err := svc.VerifyFunc(ctx, c.Settings, c.Pool)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		return WriteVerification(env, c.Pool.Config().ConnConfig.Database, checks, c.JSON)
	})
}
