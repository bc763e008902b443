package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/gl"
)

// The headers every ledger read answers with: where it was read, and at most how many seconds
// behind the primary that was.
const (
	ReadSourceHeader    = "X-Read-Source"    // "primary" or "replica"
	ReadStalenessHeader = "X-Read-Staleness" // seconds, such as 0.250; 0 on the primary
)

// Replica is a replica of the GL's database the ledger's reads go to while it is fresh enough.
type Replica struct {
	Ledger Ledger // the ledger read on the replica
	// FreshnessFunc measures the replica now: at most how far behind the primary it is, or an
	// error when it is further behind than the bound or does not answer (the read then goes to
	// the primary).
	FreshnessFunc func(ctx context.Context) (time.Duration, error)
}

// readSource is where a request's ledger reads go, chosen once per request (freshness).
type readSource struct{}

// freshness chooses where the request's ledger reads go (the replica when it is within its
// bound, else the primary) and says so in the response's headers, before h writes any.
func freshness(replica *Replica, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if replica == nil {
			w.Header().Set(ReadSourceHeader, "primary")
			w.Header().Set(ReadStalenessHeader, "0")
			h.ServeHTTP(w, r)
			return
		}
		staleness, err := replica.FreshnessFunc(r.Context())
		if err != nil {
			zerolog.Ctx(r.Context()).Debug().Err(err).Msg("read from the primary: the replica is not fresh enough")
			w.Header().Set(ReadSourceHeader, "primary")
			w.Header().Set(ReadStalenessHeader, "0")
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), readSource{}, false)))
			return
		}
		w.Header().Set(ReadSourceHeader, "replica")
		w.Header().Set(ReadStalenessHeader, strconv.FormatFloat(staleness.Seconds(), 'f', 3, 64))
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), readSource{}, true)))
	})
}

// Routed is the ledger read on the replica while it is fresh enough, else on primary: as the
// request's headers said (an API read, chosen by freshness), or measured at each read (the
// console's pages). Without a replica it is primary.
func Routed(primary Ledger, replica *Replica) Ledger {
	if replica == nil {
		return primary
	}
	return routed{primary: primary, replica: replica}
}

type routed struct {
	primary Ledger
	replica *Replica
}

func (l routed) pick(ctx context.Context) Ledger {
	replica, chosen := ctx.Value(readSource{}).(bool)
	if !chosen {
		_, err := l.replica.FreshnessFunc(ctx)
		replica = err == nil
	}
	if replica {
		return l.replica.Ledger
	}
	return l.primary
}

func (l routed) EntriesByTransfer(ctx context.Context, transferID string) ([]gl.Entry, error) {
	return l.pick(ctx).EntriesByTransfer(ctx, transferID)
}

func (l routed) EntriesByEvent(ctx context.Context, eventID string) ([]gl.Entry, error) {
	return l.pick(ctx).EntriesByEvent(ctx, eventID)
}

func (l routed) Entries(ctx context.Context, q gl.EntryQuery) (gl.EntryPage, error) {
	return l.pick(ctx).Entries(ctx, q)
}

func (l routed) AccountBalance(ctx context.Context, code, currency string, asOf *time.Time) (gl.AccountBalance, error) {
	return l.pick(ctx).AccountBalance(ctx, code, currency, asOf)
}

func (l routed) WalletBalance(ctx context.Context, code, currency, walletID string, asOf *time.Time) (gl.AccountBalance, error) {
	return l.pick(ctx).WalletBalance(ctx, code, currency, walletID, asOf)
}

func (l routed) Statement(ctx context.Context, q gl.StatementQuery) (gl.Statement, error) {
	return l.pick(ctx).Statement(ctx, q)
}

func (l routed) TrialBalance(ctx context.Context) (gl.TrialBalance, error) {
	return l.pick(ctx).TrialBalance(ctx)
}

func (l routed) TrialBalanceAsOf(ctx context.Context, asOf *time.Time) (gl.TrialBalance, error) {
	return l.pick(ctx).TrialBalanceAsOf(ctx, asOf)
}

func (l routed) Accounts(ctx context.Context) ([]gl.Account, error) {
	return l.pick(ctx).Accounts(ctx)
}
