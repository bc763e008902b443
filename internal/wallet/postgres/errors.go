package postgres

import (
	"errors"

	"walletgl/internal/database"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
)

// errNoRow is a statement that returned no row: nothing matched, or ON CONFLICT DO NOTHING
// skipped an insert. The caller, who knows what it asked for, names the wallet error.
var errNoRow = errors.New("no row")

// interpretError is the one place where the store reads a database error, and the edge where
// it becomes a wallet error: no row is errNoRow, a database that cannot be reached is
// wallet.ErrUnavailable (its cause kept, for the log); wallet errors pass as they are, and
// anything else is returned unchanged, an internal error. A refusal that only the request can
// explain (the transfer's wallets, its key held too long) is explained by claimError.
func interpretError(err error) error {
	var appErr *problem.Error
	if errors.As(err, &appErr) {
		return err
	}
	return database.Interpret(err, errNoRow, wallet.ErrUnavailable)
}
