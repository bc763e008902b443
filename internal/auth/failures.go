package auth

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultFailureLimit is how many failed authentications a client address may make unless
// configured: one a second, with a burst of 30.
var DefaultFailureLimit = RateLimit{PerSecond: 1, Burst: 30}

// maxClients bounds the addresses whose failures are counted: past it, the address heard from
// least recently is forgotten.
const maxClients = 10000

// failures counts failed authentications per client address, in a bounded LRU of limiters.
type failures struct {
	limit RateLimit

	mu      sync.Mutex
	order   *list.List // of *client, most recently heard first
	clients map[string]*list.Element
}

type client struct {
	addr string
	lim  *rate.Limiter
}

func newFailures(limit RateLimit) *failures {
	return &failures{limit: limit, order: list.New(), clients: map[string]*list.Element{}}
}

// blocked says how long addr must wait before a key it sends is looked up again: zero while it
// has failures to spend.
func (f *failures) blocked(addr string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.clients[addr]
	if !ok {
		return 0
	}
	lim := e.Value.(*client).lim
	now := time.Now()
	if lim.TokensAt(now) >= 1 {
		return 0
	}
	res := lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	res.CancelAt(now)
	return max(wait, time.Millisecond)
}

// fail spends one failure of addr's allowance.
func (f *failures) fail(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.clients[addr]
	if ok {
		f.order.MoveToFront(e)
	} else {
		if f.order.Len() >= maxClients {
			oldest := f.order.Back()
			f.order.Remove(oldest)
			delete(f.clients, oldest.Value.(*client).addr)
		}
		e = f.order.PushFront(&client{addr: addr, lim: rate.NewLimiter(rate.Limit(f.limit.PerSecond), f.limit.Burst)})
		f.clients[addr] = e
	}
	e.Value.(*client).lim.Allow()
}

// len is how many addresses are counted.
func (f *failures) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.order.Len()
}

// ClientAddr is the address failed authentications are counted by: the connection's remote
// address without its port. No proxy header (X-Forwarded-For, Forwarded) is trusted: behind a
// proxy every client shares the proxy's address.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type clientKey struct{}

// WithClient returns ctx carrying the client address of r, for Guard.Authorize.
func WithClient(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, clientKey{}, ClientAddr(r))
}

func clientOf(ctx context.Context) (string, bool) {
	addr, ok := ctx.Value(clientKey{}).(string)
	return addr, ok
}
