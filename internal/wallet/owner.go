package wallet

import (
	"context"
	"errors"
	"time"

	"walletgl/internal/problem"
)

// Actor is who a request acts for. Owner "" is the platform, which acts on every wallet; an
// owner (a customer) acts on its own wallets alone: it reads only them (and the transfers from
// or to them, the holds on them), debits only them, and may pay into any wallet. Its
// Idempotency-Keys are its own: another owner's same key is another request.
type Actor struct {
	Owner string
	// Funding lets the actor debit a wallet that may go negative, which creates money (the
	// scope wallets:admin).
	Funding bool
}

// Platform is the actor of a request that names none: the service's own callers (commands,
// workers), acting on every wallet.
var Platform = Actor{Funding: true}

type actorKey struct{}

// WithActor returns ctx carrying the actor its request acts for (the HTTP API sets it from the
// request's API key).
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf is the actor ctx carries, Platform when none.
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Platform
}

// OwnerFilter is the owner a read is limited to: nil for the platform (every wallet).
func (a Actor) OwnerFilter() *string {
	if a.Owner == "" {
		return nil
	}
	owner := a.Owner
	return &owner
}

// Reads reports whether a may read a wallet of owner ("" for the platform's).
func (a Actor) Reads(owner string) bool { return a.Owner == "" || a.Owner == owner }

// ErrForbidden refuses a movement the actor may not make although it may see the wallets: a
// debit of a wallet that may go negative without wallets:admin, a reversal of a transfer the
// owner did not receive. The same type as the API's other 403s.
var ErrForbidden = problem.New(problem.Forbidden, "forbidden", "the API key does not allow this request")

// CheckDebit applies the actor's rights to w, the wallet a movement takes money from, named by
// field in the request: a wallet of another owner is not found, exactly as one that does not
// exist; a wallet that may go negative needs Funding. A nil wallet is left to the movement's
// own rules.
func CheckDebit(a Actor, field string, w *Wallet) error {
	switch {
	case w == nil:
		return nil
	case !a.Reads(w.Owner):
		return problem.Newf(ErrWalletNotFound, "%s %q does not exist", field, w.ID)
	case w.AllowNegative && !a.Funding:
		return problem.Newf(ErrForbidden, "wallet %q may go negative: debiting it needs an API key with the scope wallets:admin", w.ID)
	}
	return nil
}

// RefusalRetention is how long a refused request's answer is kept under its Idempotency-Key:
// within it the same key replays the refusal; after it the key is free again.
const RefusalRetention = 24 * time.Hour

// Kept reports whether err is a refusal kept under its request's key: a 422 of the rules, given
// once the request started executing. Invalid requests (400), missing things (404) and
// conflicts of state (409) keep nothing.
func Kept(err error) bool {
	var p *problem.Error
	return errors.As(err, &p) && p.Kind == problem.Unprocessable && !errors.Is(err, ErrIdempotencyKeyReused)
}

// ReplayedRefusal is a refusal answered again for a request with its key and body: the same
// problem, and the HTTP API marks it replayed (Idempotency-Replayed: true).
type ReplayedRefusal struct{ Refusal *problem.Error }

func (r *ReplayedRefusal) Error() string { return r.Refusal.Error() }

// Unwrap is the refusal, so that errors.Is and errors.As see it.
func (r *ReplayedRefusal) Unwrap() error { return r.Refusal }

// ReplayRefusal answers a request whose key holds the refusal of slug and detail made for the
// request of ownerHash: the refusal again when hash is the same request, idempotency-key-reused
// otherwise.
func ReplayRefusal(key string, hash, ownerHash []byte, slug, detail string) error {
	if string(hash) != string(ownerHash) {
		return problem.Newf(ErrIdempotencyKeyReused,
			"Idempotency-Key %q was used for a request that was refused, which differs from this request", key)
	}
	return &ReplayedRefusal{Refusal: &problem.Error{Kind: problem.Unprocessable, Slug: slug, Detail: detail}}
}
