package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/reconciledb"
)

// WalletViewName is the view of the wallet's database a WalletView reads: a versioned,
// read-only contract the wallet publishes (db/schema/wallet/00004_reversals.sql; v1 without the reversals: 00002).
// WalletViewNameKinds is its successor with each transfer's kind (wallet 00006), read first;
// a wallet database without it, or a role not granted it, is read through WalletViewName.
// WalletViewNameBatches, its successor with each transfer's GL entry key (a batch's legs keyed
// by their batch), is read before both.
const (
	WalletViewName        = "reconcile_transfers_v2"
	WalletViewNameKinds   = "reconcile_transfers_v3"
	WalletViewNameBatches = "reconcile_transfers_v4"
)

// WalletView reads the wallet's transfers from the wallet's database for a reconciliation,
// through the view WalletViewName and nothing else, over read-only transactions: a replica
// serves it as well as the primary.
type WalletView struct {
	pool         *pgxpool.Pool
	queries      *reconciledb.Queries
	noKinds      bool // reconcile_transfers_v3 cannot be read: v2, without kinds
	noBatches    bool // reconcile_transfers_v4 cannot be read: v3, without entry keys
	noMovesByKey bool // reconcile_movements_v2 cannot be read: v1
	denied       []string
}

// Denied names the views this reader fell back from because its role may not read them
// (insufficient_privilege), oldest reason first: the wallet has them, so a reconciliation
// through the older ones misses what only they tell (a batch's legs keyed by their batch). A
// view the wallet does not have yet is not named.
func (v *WalletView) Denied() []string { return v.denied }

// fallBack records that view cannot be read, for err.
func (v *WalletView) fallBack(view string, err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		v.denied = append(v.denied, view)
	}
}

var _ gl.TransferSource = (*WalletView)(nil)

// walletViewPage is how many transfers one query reads.
const walletViewPage = 1000

// OpenWalletView connects to the wallet's database at dbURL with read-only transactions.
func OpenWalletView(ctx context.Context, dbURL string) (*WalletView, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse the wallet's database url: %w", err)
	}
	cfg.MaxConns = 2
	database.ReadOnlySessions(cfg)
	database.EncodeUUIDsDirectly(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open the wallet's database: %w", err)
	}
	return &WalletView{pool: pool, queries: reconciledb.New(pool)}, nil
}

// Close closes the connections.
func (v *WalletView) Close() { v.pool.Close() }

// TransfersView names the view of transfers this reader reads: the newest its role may read
// (Transfers falls back), for reports.
func (v *WalletView) TransfersView() string {
	switch {
	case !v.noBatches:
		return WalletViewNameBatches
	case !v.noKinds:
		return WalletViewNameKinds
	}
	return WalletViewName
}

// Database is the name of the wallet's database, for reports.
func (v *WalletView) Database() string { return v.pool.Config().ConnConfig.Database }

// Transfers pages through the view in id order: v4, with entry keys, when it can be read,
// else v3, with kinds, else v2.
func (v *WalletView) Transfers(ctx context.Context) ([]gl.SourceTransfer, error) {
	if !v.noBatches {
		out, err := v.transfersWithKeys(ctx)
		if !viewUnreadable(err) {
			return out, err
		}
		v.noBatches = true
		v.fallBack(WalletViewNameBatches, err)
	}
	if !v.noKinds {
		out, err := v.transfersWithKinds(ctx)
		if !viewUnreadable(err) {
			return out, err
		}
		v.noKinds = true
		v.fallBack(WalletViewNameKinds, err)
	}
	var out []gl.SourceTransfer
	after := uuid.Nil
	for {
		rows, err := v.queries.ReconcileTransfers(ctx, reconciledb.ReconcileTransfersParams{After: after, RowLimit: walletViewPage})
		if err != nil {
			return nil, viewError(err, "read the wallet's transfers")
		}
		for _, r := range rows {
			out = append(out, sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID))
			after = r.ID
		}
		if len(rows) < walletViewPage {
			return out, nil
		}
	}
}

func (v *WalletView) transfersWithKinds(ctx context.Context) ([]gl.SourceTransfer, error) {
	var out []gl.SourceTransfer
	after := uuid.Nil
	for {
		rows, err := v.queries.ReconcileTransfersV3(ctx, reconciledb.ReconcileTransfersV3Params{After: after, RowLimit: walletViewPage})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			t := sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID)
			t.Kind = r.Kind
			out = append(out, t)
			after = r.ID
		}
		if len(rows) < walletViewPage {
			return out, nil
		}
	}
}

func (v *WalletView) transfersWithKeys(ctx context.Context) ([]gl.SourceTransfer, error) {
	var out []gl.SourceTransfer
	after := uuid.Nil
	for {
		rows, err := v.queries.ReconcileTransfersV4(ctx, reconciledb.ReconcileTransfersV4Params{After: after, RowLimit: walletViewPage})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			t := sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID)
			t.Kind, t.EntryKey = r.Kind, r.EntryKey
			out = append(out, t)
			after = r.ID
		}
		if len(rows) < walletViewPage {
			return out, nil
		}
	}
}

// Transfer reads one transfer; an id that is not a UUID is no transfer of the wallet's.
func (v *WalletView) Transfer(ctx context.Context, id string) (gl.SourceTransfer, bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return gl.SourceTransfer{}, false, nil
	}
	if !v.noBatches {
		r, err := v.queries.ReconcileTransferV4(ctx, uid)
		switch {
		case err == nil:
			t := sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID)
			t.Kind, t.EntryKey = r.Kind, r.EntryKey
			return t, true, nil
		case errors.Is(interpretError(err), errNoRow):
			return gl.SourceTransfer{}, false, nil
		case !viewUnreadable(err):
			return gl.SourceTransfer{}, false, viewError(err, "read the wallet's transfer %s", id)
		}
		v.noBatches = true
		v.fallBack(WalletViewNameBatches, err)
	}
	if !v.noKinds {
		r, err := v.queries.ReconcileTransferV3(ctx, uid)
		switch {
		case err == nil:
			t := sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID)
			t.Kind = r.Kind
			return t, true, nil
		case errors.Is(interpretError(err), errNoRow):
			return gl.SourceTransfer{}, false, nil
		case !viewUnreadable(err):
			return gl.SourceTransfer{}, false, viewError(err, "read the wallet's transfer %s", id)
		}
		v.noKinds = true
		v.fallBack(WalletViewNameKinds, err)
	}
	r, err := v.queries.ReconcileTransfer(ctx, uid)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return gl.SourceTransfer{}, false, nil
	case err != nil:
		return gl.SourceTransfer{}, false, viewError(err, "read the wallet's transfer %s", id)
	}
	return sourceTransfer(r.ID, r.Amount, r.Currency, r.ReversesTransferID), true, nil
}

// viewUnreadable reports whether err says the kinds' view is missing (a wallet before
// migration 00006) or not granted to this role: the reader falls back to v2.
func viewUnreadable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "42501") // undefined_table, insufficient_privilege
}

func sourceTransfer(id uuid.UUID, amount int64, currency string, reverses uuid.NullUUID) gl.SourceTransfer {
	t := gl.SourceTransfer{ID: id.String(), Amount: amount, Currency: currency}
	if reverses.Valid {
		t.ReversesTransferID = reverses.UUID.String()
	}
	return t
}

// viewError names the likely cause when the view is missing: a wallet database older than the
// contract, or a URL that is not the wallet's database.
func viewError(err error, format string, args ...any) error {
	err = interpretError(err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		err = fmt.Errorf("the database has no view %s (is it the wallet's database, migrated by a wallet that publishes the view?): %w", WalletViewName, err)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// HoldsViewName is the view of the wallet's holds a WalletView reads (wallet 00007): a wallet
// database without it, or a role not granted it, is reconciled without its holds
// (gl.ErrNoHolds: the GL's hold totals only).
const HoldsViewName = "reconcile_holds_v1"

var _ gl.HoldSource = (*WalletView)(nil)

// Holds pages through reconcile_holds_v1 in id order.
func (v *WalletView) Holds(ctx context.Context) ([]gl.SourceHold, error) {
	out := []gl.SourceHold{}
	after := uuid.Nil
	for {
		rows, err := v.queries.ReconcileHolds(ctx, reconciledb.ReconcileHoldsParams{After: after, RowLimit: walletViewPage})
		if viewUnreadable(err) {
			return nil, fmt.Errorf("read the wallet's holds (view %s): %w: %w", HoldsViewName, gl.ErrNoHolds, interpretError(err))
		}
		if err != nil {
			return nil, viewError(err, "read the wallet's holds")
		}
		for _, r := range rows {
			out = append(out, gl.SourceHold{ID: r.ID.String(), WalletID: r.WalletID, Amount: r.Amount, Currency: r.Currency, Status: r.Status})
			after = r.ID
		}
		if len(rows) < walletViewPage {
			return out, nil
		}
	}
}

// Hold reads one hold; an id that is not a UUID is no hold of the wallet's.
func (v *WalletView) Hold(ctx context.Context, id string) (gl.SourceHold, bool, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return gl.SourceHold{}, false, nil
	}
	r, err := v.queries.ReconcileHold(ctx, uid)
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return gl.SourceHold{}, false, nil
	case err != nil:
		return gl.SourceHold{}, false, fmt.Errorf("read the wallet's hold %s: %w", id, err)
	}
	return gl.SourceHold{ID: r.ID.String(), WalletID: r.WalletID, Amount: r.Amount, Currency: r.Currency, Status: r.Status}, true, nil
}

// BalancesViewName and MovementsViewName are the views of the wallet's balances and of what
// each movement did to each wallet (wallet 00012), read in one snapshot: a wallet database
// without them, or a role not granted them, is reconciled without its balances
// (gl.ErrNoBalances). MovementsViewNameByKey, the movements keyed by GL entry key (a batch's
// legs by their batch), is read instead of MovementsViewName where it can be.
const (
	BalancesViewName       = "reconcile_balances_v1"
	MovementsViewName      = "reconcile_movements_v1"
	MovementsViewNameByKey = "reconcile_movements_v2"
)

var _ gl.BalanceSource = (*WalletView)(nil)

// WalletSnapshot reads every wallet's balance and every movement's change to each wallet in
// one REPEATABLE READ, read-only transaction: both as of one moment of the wallet.
func (v *WalletView) WalletSnapshot(ctx context.Context) (gl.WalletSnapshot, error) {
	tx, err := v.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return gl.WalletSnapshot{}, fmt.Errorf("begin the wallet's snapshot: %w", interpretError(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := v.queries.WithTx(tx)
	wallets, err := q.ReconcileBalances(ctx)
	if viewUnreadable(err) {
		return gl.WalletSnapshot{}, fmt.Errorf("read the wallet's balances (view %s): %w: %w", BalancesViewName, gl.ErrNoBalances, interpretError(err))
	}
	if err != nil {
		return gl.WalletSnapshot{}, fmt.Errorf("read the wallet's balances: %w", interpretError(err))
	}
	movements, err := v.movements(ctx, tx)
	if viewUnreadable(err) {
		return gl.WalletSnapshot{}, fmt.Errorf("read the wallet's movements (view %s): %w: %w", MovementsViewName, gl.ErrNoBalances, interpretError(err))
	}
	if err != nil {
		return gl.WalletSnapshot{}, fmt.Errorf("read the wallet's movements: %w", interpretError(err))
	}
	snap := gl.WalletSnapshot{Wallets: make([]gl.SourceWallet, 0, len(wallets)), Movements: make([]gl.SourceMovement, 0, len(movements))}
	for _, w := range wallets {
		snap.Wallets = append(snap.Wallets, gl.SourceWallet{ID: w.WalletID, Currency: w.Currency, Balance: w.Balance, Held: w.Held, AllowNegative: w.AllowNegative})
	}
	for _, m := range movements {
		snap.Movements = append(snap.Movements, gl.SourceMovement{ID: m.MovementID, WalletID: m.WalletID, Currency: m.Currency, BalanceChange: m.BalanceChange, HeldChange: m.HeldChange})
	}
	return snap, nil
}

// movements reads reconcile_movements_v2 (a batch's legs keyed by their entry key) when it can,
// else reconcile_movements_v1. A failed statement ends the snapshot's transaction, so v2 is
// tried under a savepoint.
func (v *WalletView) movements(ctx context.Context, tx pgx.Tx) ([]reconciledb.ReconcileMovementsV1, error) {
	if !v.noMovesByKey {
		rows, err := movementsByKey(ctx, tx)
		if !viewUnreadable(err) {
			return rows, err
		}
		v.noMovesByKey = true
		v.fallBack(MovementsViewNameByKey, err)
	}
	return v.queries.WithTx(tx).ReconcileMovements(ctx)
}

func movementsByKey(ctx context.Context, tx pgx.Tx) ([]reconciledb.ReconcileMovementsV1, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("savepoint before the wallet's movements: %w", interpretError(err))
	}
	defer func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }()
	byKey, err := reconciledb.New(sp).ReconcileMovementsV2(ctx)
	if err != nil {
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("release the savepoint of the wallet's movements: %w", interpretError(err))
	}
	rows := make([]reconciledb.ReconcileMovementsV1, len(byKey))
	for i, m := range byKey {
		rows[i] = reconciledb.ReconcileMovementsV1(m)
	}
	return rows, nil
}
