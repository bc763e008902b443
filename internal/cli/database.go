package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
)

// Access is what a command may do in its database.
type Access int

const (
	// ReadOnly sessions run with default_transaction_read_only = on (database.ReadOnlySessions):
	// a command that only looks cannot change a row, whatever its code does.
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
	open := database.OpenTool
	if access == ReadOnly {
		open = database.OpenToolReadOnly
	}
	pool, err := open(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s: %w", pool.Config().ConnConfig.Database, err)
	}
	return pool, nil
}
