package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
)

var _ gl.SubLedgerReader = (*Ledger)(nil)

// subLedgerSnapshot is a REPEATABLE READ, read-only transaction of the GL kept open: its
// sub-ledgers, and which movements it had posted, as of one snapshot.
type subLedgerSnapshot struct {
	tx   pgx.Tx
	q    *gldb.Queries
	subs []gl.SubLedger
}

// postedBatch is how many movement keys one PostedMovements statement looks up.
const postedBatch = 10000

// SubLedgerSnapshot opens a REPEATABLE READ, read-only transaction and reads every wallet's
// sub-account of every control account of wallets in it; Close ends it.
func (l *Ledger) SubLedgerSnapshot(ctx context.Context) (gl.SubLedgerSnapshot, error) {
	tx, err := l.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("begin the sub-ledgers' snapshot: %w", interpretError(err))
	}
	s := &subLedgerSnapshot{tx: tx, q: l.queries.WithTx(tx)}
	rows, err := s.q.WalletSubLedgers(ctx)
	if err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("read the wallets' sub-ledgers: %w", interpretError(err))
	}
	for _, r := range rows {
		balance, err := sumFrom(r.Balance)
		if err != nil {
			s.Close(ctx)
			return nil, fmt.Errorf("sub-ledger of wallet %q on account %s in %s: %w", r.WalletID, r.AccountCode, r.Currency, err)
		}
		s.subs = append(s.subs, gl.SubLedger{AccountCode: r.AccountCode, WalletID: r.WalletID, Currency: r.Currency, Balance: balance})
	}
	return s, nil
}

func (s *subLedgerSnapshot) SubLedgers() []gl.SubLedger { return s.subs }

// Posted looks the movement keys up in the snapshot, postedBatch at a time.
func (s *subLedgerSnapshot) Posted(ctx context.Context, ids []string) (map[string]bool, error) {
	posted := make(map[string]bool, len(ids))
	for from := 0; from < len(ids); from += postedBatch {
		found, err := s.q.PostedMovements(ctx, ids[from:min(from+postedBatch, len(ids))])
		if err != nil {
			return nil, fmt.Errorf("look up %d movements: %w", len(ids), interpretError(err))
		}
		for _, id := range found {
			posted[id] = true
		}
	}
	return posted, nil
}

// Close ends the snapshot's transaction (it wrote nothing), even when ctx is done.
func (s *subLedgerSnapshot) Close(ctx context.Context) {
	_ = s.tx.Rollback(context.WithoutCancel(ctx))
}

// WalletsSeen reads, in tx, what the ledger's lines say of each of walletIDs (gl.WalletSeen);
// a wallet no line names is absent from the map.
func (l *Ledger) WalletsSeen(ctx context.Context, tx pgx.Tx, walletIDs []string) (map[string]gl.WalletSeen, error) {
	seen := make(map[string]gl.WalletSeen, len(walletIDs))
	if len(walletIDs) == 0 {
		return seen, nil
	}
	q := l.queries.WithTx(tx)
	customers, err := q.WalletsOnControlAccountsOfCustomers(ctx, walletIDs)
	if err != nil {
		return nil, fmt.Errorf("read customers' wallets among %d: %w", len(walletIDs), interpretError(err))
	}
	for _, id := range customers {
		s := seen[id]
		s.Customer = true
		seen[id] = s
	}
	external, err := q.WalletsOnOtherAccounts(ctx, walletIDs)
	if err != nil {
		return nil, fmt.Errorf("read external wallets among %d: %w", len(walletIDs), interpretError(err))
	}
	for _, id := range external {
		s := seen[id]
		s.External = true
		seen[id] = s
	}
	return seen, nil
}
