package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// request is one transfer the load generator sent.
type request struct {
	At      time.Duration // when it was due (open loop) or sent (closed loop), from the run's start
	Latency time.Duration // until the answer; in the open loop from when it was due
	Status  int           // HTTP status, 0 when no answer came
}

// loadGen sends transfers between random distinct users u1…u<users> with a unique
// Idempotency-Key each.
type loadGen struct {
	url     string
	key     string // the API key every request sends
	users   int
	runID   string
	start   time.Time // the run's start: times in requests are offsets from it
	http    *http.Client
	sent    atomic.Int64
	ok      atomic.Int64
	failed  atomic.Int64
	seq     atomic.Int64
	maxOpen int // open loop: requests in flight at most (more are counted as not sent)
}

func newLoadGen(walletAddr, key string, users int, runID string, start time.Time, clients int) *loadGen {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
	}
	return &loadGen{
		url: "http://" + walletAddr + "/v1/transfers", key: key, users: users, runID: runID, start: start,
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, maxOpen: 4096,
	}
}

func (g *loadGen) close() { g.http.CloseIdleConnections() }

func (g *loadGen) resetCounters() {
	g.sent.Store(0)
	g.ok.Store(0)
	g.failed.Store(0)
}

// send posts one transfer and returns its status (0: no answer).
func (g *loadGen) send(ctx context.Context, rng *rand.Rand, phase string) int {
	from := 1 + rng.IntN(g.users)
	to := 1 + (from+rng.IntN(g.users-1))%g.users // never from itself
	amount := 1 + rng.IntN(100)
	body := make([]byte, 0, 128)
	body = append(body, `{"from_wallet_id":"u`...)
	body = strconv.AppendInt(body, int64(from), 10)
	body = append(body, `","to_wallet_id":"u`...)
	body = strconv.AppendInt(body, int64(to), 10)
	body = append(body, `","amount":`...)
	body = strconv.AppendInt(body, int64(amount), 10)
	body = append(body, `,"currency":"USD"}`...)
	key := g.runID + "-" + phase + "-" + strconv.FormatInt(g.seq.Add(1), 10)

	g.sent.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		g.failed.Add(1)
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+g.key)
	resp, err := g.http.Do(req)
	if err != nil {
		g.failed.Add(1)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		g.ok.Add(1)
	} else {
		g.failed.Add(1)
	}
	return resp.StatusCode
}

// closedLoop runs clients workers, each sending its next transfer when the last one was
// answered, for d.
func (g *loadGen) closedLoop(ctx context.Context, clients int, d time.Duration) []request {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	results := make([][]request, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				t0 := time.Now()
				status := g.send(context.WithoutCancel(ctx), rng, "closed")
				results[c] = append(results[c], request{At: t0.Sub(g.start), Latency: time.Since(t0), Status: status})
			}
		}()
	}
	wg.Wait()
	var all []request
	for _, r := range results {
		all = append(all, r...)
	}
	return all
}

// openLoop sends rate transfers per second for d, each at its due time whether or not earlier
// ones were answered; latency counts from the due time, so a stalled server cannot hide its
// queue (no coordinated omission). Requests that would exceed maxOpen in flight are skipped
// and counted.
func (g *loadGen) openLoop(ctx context.Context, rate float64, d time.Duration) (reqs []request, skipped int64) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d.Seconds() * rate)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		sem   = make(chan struct{}, g.maxOpen)
		begin = time.Now()
	)
	rng := rand.New(rand.NewPCG(7, uint64(begin.UnixNano())))
	for i := range n {
		due := begin.Add(time.Duration(i) * interval)
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			skipped++
			continue
		}
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status := g.send(context.WithoutCancel(ctx), rand.New(rand.NewPCG(seed, 1)), "open")
			r := request{At: due.Sub(g.start), Latency: time.Since(due), Status: status}
			mu.Lock()
			reqs = append(reqs, r)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return reqs, skipped
}

// progress prints a status line every second on a terminal (rewritten in place with \r) or
// every five seconds otherwise, until ctx ends.
func progress(ctx context.Context, out io.Writer, tty bool, line func() string) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	every := 5 * time.Second
	if tty {
		every = time.Second
	}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if tty {
					fmt.Fprintf(out, "\r%-100s\r", "")
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(out, "\r%-100s", line())
				} else {
					fmt.Fprintln(out, "  "+line())
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
