package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
)

// Access is what a command may do in its database.
type Access int

const (
	// ReadOnly sessions run with default_transaction_read_only = on: a command that only looks
	// cannot change a row, whatever its code does.
	ReadOnly Access = iota
	// ReadWrite is for the commands that change rows (requeue, retry, accounts add, …).
	ReadWrite
	// AsOwner is ReadWrite as the database's owner: the migrate URL (*_MIGRATE_DATABASE_URL),
	// for the rows the runtime role may not write (API keys). Without a migrate URL it is the
	// service's URL, as in development where one role does everything.
	AsOwner
)

// OpenDatabase connects an operator command to the database at dbURL, with a tool's pool
// (database.OpenTool), and checks that it answers. It never creates nor migrates a
// database: a wrong URL fails here instead of leaving an empty database behind.
func OpenDatabase(ctx context.Context, dbURL string, access Access) (*pgxpool.Pool, error) {
	if access == ReadOnly {
		dbURL = readOnly(dbURL)
	}
	pool, err := database.OpenTool(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s: %w", pool.Config().ConnConfig.Database, err)
	}
	return pool, nil
}

// readOnly adds default_transaction_read_only = on to the sessions of dbURL, a URL or a
// keyword/value string (pgx passes a parameter it does not know on to the server). The string is
// extended rather than parsed: net/url refuses the multi-host URLs PostgreSQL accepts.
func readOnly(dbURL string) string {
	const param = "default_transaction_read_only=on"
	switch {
	case !strings.HasPrefix(dbURL, "postgres://") && !strings.HasPrefix(dbURL, "postgresql://"):
		return dbURL + " " + param
	case strings.Contains(dbURL, "?"):
		return dbURL + "&" + param
	default:
		return dbURL + "?" + param
	}
}
