package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres/internal/walletdb"
)

// Refusals are kept under the key of the request they refuse (wallet.Kept), in the key's space:
// transfers, reversals and captures share one, holds have theirs. A refused request's
// transaction rolls back (its claim with it: the runtime role never deletes a transfer or a
// hold), and the refusal is recorded in a transaction of its own under the key's exclusive lock
// (LockKey). Every request that claims a key holds the key's shared lock until it commits and
// looks for a refusal after taking it: whichever comes second sees the other.
const (
	spaceTransfer = "transfer"
	spaceHold     = "hold"
)

// expiredRefusalsPerInsert is how many expired refusals each new refusal removes: more than
// one, so the table never grows beyond the refusals of one retention.
const expiredRefusalsPerInsert = 100

// claimedKey is an Idempotency-Key as its owner holds it ("" for the platform).
type claimedKey struct {
	owner, key string
}

// refused is a refusal to keep under its request's key: the writer returns it, its transaction
// rolls back, and the store records it (Store.keepRefusal).
type refused struct{ err error }

func (r *refused) Error() string { return r.err.Error() }
func (r *refused) Unwrap() error { return r.err }

// refuse is err as the writer returns it: a refusal to keep, or an error as it is.
func refuse(err error) error {
	if wallet.Kept(err) {
		return &refused{err: err}
	}
	return err
}

// checkRefusal answers a request that just claimed its key when a refusal holds the key: the
// refusal again for the same request (hash), idempotency-key-reused for another. nil: no
// refusal holds it. It takes the key's shared lock first, held until the transaction ends.
func checkRefusal(ctx context.Context, q *walletdb.Queries, space string, k claimedKey, hash []byte) error {
	if err := q.LockKeysShared(ctx, walletdb.LockKeysSharedParams{
		KeySpace: space, IdempotencyOwners: []string{k.owner}, IdempotencyKeys: []string{k.key},
	}); err != nil {
		return fmt.Errorf("lock idempotency key: %w", err)
	}
	r, err := q.GetRefusal(ctx, walletdb.GetRefusalParams{KeySpace: space, IdempotencyOwner: k.owner, IdempotencyKey: k.key})
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return nil
	case err != nil:
		return fmt.Errorf("load refusal: %w", err)
	}
	return replayRefusal(k.key, hash, r)
}

func replayRefusal(key string, hash []byte, r walletdb.Refusal) error {
	return wallet.ReplayRefusal(key, hash, r.RequestHash, r.ProblemType, r.Detail)
}

// keepRefusal answers a request whose transaction rolled back with err: a refusal to keep is
// recorded under the request's key and answered; any other error is returned as it is. A key
// that another request took meanwhile answers as that request's key: the same request is in
// flight (retry: it replays), another is idempotency-key-reused.
func (s *Store) keepRefusal(ctx context.Context, space string, k claimedKey, hash []byte, err error) error {
	var r *refused
	if !errors.As(err, &r) {
		return err
	}
	answer, err := database.WithTxV(ctx, s.pool, func(tx pgx.Tx) (error, error) {
		q := s.queries.WithTx(tx)
		if err := q.LockKey(ctx, walletdb.LockKeyParams{KeySpace: space, IdempotencyOwner: k.owner, IdempotencyKey: k.key}); err != nil {
			return nil, fmt.Errorf("lock idempotency key: %w", err)
		}
		if taken, err := keyTaken(ctx, q, space, k, hash); taken != nil || err != nil {
			return taken, err
		}
		var p *problem.Error
		errors.As(r.err, &p)
		n, err := q.InsertRefusal(ctx, walletdb.InsertRefusalParams{
			KeySpace: space, IdempotencyOwner: k.owner, IdempotencyKey: k.key, RequestHash: hash,
			ProblemType: p.Slug, Detail: p.Detail, ExpiresAt: time.Now().Add(wallet.RefusalRetention),
		})
		if err != nil {
			return nil, fmt.Errorf("keep refusal: %w", err)
		}
		if n == 0 { // a refusal of the key was kept meanwhile
			kept, err := q.GetRefusal(ctx, walletdb.GetRefusalParams{KeySpace: space, IdempotencyOwner: k.owner, IdempotencyKey: k.key})
			if err != nil {
				return nil, fmt.Errorf("load refusal: %w", err)
			}
			return replayRefusal(k.key, hash, kept), nil
		}
		if _, err := q.DeleteExpiredRefusals(ctx, expiredRefusalsPerInsert); err != nil {
			return nil, fmt.Errorf("delete expired refusals: %w", err)
		}
		return r.err, nil
	})
	if err != nil {
		return fmt.Errorf("keep refusal: %w", interpretError(err))
	}
	return answer
}

// keyTaken is the answer to a refused request whose key a transfer or hold took meanwhile
// (nil: none did).
func keyTaken(ctx context.Context, q *walletdb.Queries, space string, k claimedKey, hash []byte) (error, error) {
	var used []byte
	var err error
	if space == spaceHold {
		var h walletdb.Hold
		h, err = q.GetHoldByIdempotencyKey(ctx, walletdb.GetHoldByIdempotencyKeyParams{IdempotencyOwner: k.owner, IdempotencyKey: k.key})
		used = h.RequestHash
	} else {
		var t walletdb.GetTransferByIdempotencyKeyRow
		t, err = q.GetTransferByIdempotencyKey(ctx, walletdb.GetTransferByIdempotencyKeyParams{IdempotencyOwner: k.owner, IdempotencyKey: k.key})
		used = t.Transfer.RequestHash
	}
	switch err := interpretError(err); {
	case errors.Is(err, errNoRow):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("load the key's request: %w", err)
	}
	if string(used) == string(hash) {
		return problem.Newf(wallet.ErrIdempotencyKeyInFlight,
			"a request with Idempotency-Key %q was completed meanwhile; send it again for its answer", k.key), nil
	}
	return problem.Newf(wallet.ErrIdempotencyKeyReused,
		"Idempotency-Key %q was used for another request, which differs from this one", k.key), nil
}
