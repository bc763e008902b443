package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"walletgl/internal/database"
	"walletgl/internal/gl"
)

// errNoRow is a statement that returned no row: nothing matched, or ON CONFLICT DO NOTHING
// skipped an insert. The caller, who knows what it asked for, names the gl error.
var errNoRow = errors.New("no row")

// interpretError is the one place where the ledger and the wallet view read a database error,
// and the edge where it becomes a gl error: no row is errNoRow, a database that cannot be
// reached also matches gl.ErrUnavailable (its cause kept), so callers can tell "retry later"
// from a failure; anything else is returned unchanged.
func interpretError(err error) error { return database.Interpret(err, errNoRow, gl.ErrUnavailable) }

// isRestrictViolation reports a trigger's refusal (SQLSTATE 23001, restrict_violation): the
// guards of the journal and the posting rules.
func isRestrictViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23001"
}
