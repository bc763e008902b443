package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"walletgl/internal/systemtest"
)

// The wallets every run uses: a funding source that may go negative and users that may not.
const (
	fundingWallet = "funding"
	currency      = "USD"
)

// LoadResult is what the clients saw.
type LoadResult struct {
	Confirmed map[string]string // idempotency key -> transfer id, for every 200/201
	Refused   int               // definitive refusals (422: insufficient funds between users)
	Requests  int64             // HTTP attempts, first tries and retries
	Retried   int64             // attempts that were retries of a key
	GaveUp    int               // keys that never got an answer before the deadline
	Amounts   map[string]int64  // idempotency key -> amount asked
	// Reversals are the keys of reversals asked for, each with the key of the transfer it
	// reverses; Skipped counts reversals not sent because that transfer was not confirmed.
	Reversals map[string]string
	Skipped   int
	// Holds are the holds placed, by the Idempotency-Key of their placement.
	Holds map[string]*HoldOutcome
	// Batches are the atomic batches asked for, by their Idempotency-Key.
	Batches map[string]*BatchOutcome
	// Attempts are every HTTP attempt of the load, in no particular order.
	Attempts []Attempt
}

// Attempt is one request of the load and what came of it.
type Attempt struct {
	Sent   time.Time
	Took   time.Duration
	Status int // 0: no answer (the connection failed or timed out)
}

// Statuses counts attempts by their status (0: no answer).
func (r LoadResult) Statuses() map[int]int {
	out := map[int]int{}
	for _, a := range r.Attempts {
		out[a.Status]++
	}
	return out
}

// reversalEvery makes one job in that many, once the first clients' worth of transfers has
// gone out, a partial reversal of an earlier transfer: the mix of movements the fault
// scenarios run.
const reversalEvery = 8

// forcedEvery makes one reversal in that many a forced one (a chargeback), which may take its
// receiver below its minimum; limitsEvery gives one user in that many a credit line and another
// one in that many a maximum, so refusals at both bounds are in the mix.
const (
	forcedEvery = 3
	limitsEvery = 4
	creditLine  = 500    // the users' credit line: a minimum of −creditLine
	maxBalance  = 20_000 // the capped users' maximum
)

type loadGen struct {
	targets []*systemtest.Client
	users   []string
	rng     *rand.Rand
	mu      sync.Mutex
	res     LoadResult
	reqs    atomic.Int64
	retried atomic.Int64
}

func setupWallets(ctx context.Context, c *systemtest.Client, users int) ([]string, error) {
	if err := c.CreateWallet(ctx, fundingWallet, currency, true); err != nil {
		return nil, err
	}
	ids := make([]string, users)
	for i := range ids {
		ids[i] = fmt.Sprintf("user-%03d", i)
		var err error
		switch i % limitsEvery {
		case 1:
			err = c.CreateLimitedWallet(ctx, ids[i], currency, -creditLine, nil)
		case 2:
			capped := int64(maxBalance)
			err = c.CreateLimitedWallet(ctx, ids[i], currency, 0, &capped)
		default:
			err = c.CreateWallet(ctx, ids[i], currency, false)
		}
		if err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// runLoad sends total transfers spread over duration by clients concurrent clients. Each
// client retries a transfer with the same Idempotency-Key until it gets a definitive answer,
// as a careful client would, moving to another wallet instance when one does not answer.
func runLoad(ctx context.Context, targets []*systemtest.Client, users []string, seed uint64, total, clients int, duration time.Duration) LoadResult {
	g := &loadGen{targets: targets, users: users, rng: rand.New(rand.NewPCG(seed, 99))}
	g.res = LoadResult{Confirmed: map[string]string{}, Amounts: map[string]int64{}}
	g.res.Reversals, g.res.Holds, g.res.Batches = map[string]string{}, map[string]*HoldOutcome{}, map[string]*BatchOutcome{}
	jobs := make([]job, total)
	for i := range jobs {
		key := fmt.Sprintf("chaos-%d-%d", seed, i)
		if lag := 2 * clients; i >= lag+len(users) && g.rng.IntN(reversalEvery) == 0 {
			// An earlier transfer (not a reversal nor a batch, whose legs are reversed through
			// their batch), far enough back to be answered by now.
			target := g.rng.IntN(i - lag)
			for jobs[target].reverses != "" || jobs[target].batch != nil {
				target--
			}
			amount := max(jobs[target].req.Amount/2, 1)
			forced := g.rng.IntN(forcedEvery) == 0
			jobs[i] = job{key: key, reverses: jobs[target].key, forced: forced, req: systemtest.TransferRequest{Amount: amount}}
			g.res.Amounts[key], g.res.Reversals[key] = amount, jobs[target].key
			continue
		}
		if i >= 2*clients+len(users) && g.rng.IntN(holdEvery) == 0 {
			jobs[i] = job{key: key, hold: newHoldPlan(g.rng, users)}
			continue
		}
		if i >= 2*clients+len(users) && len(users) >= 3 && g.rng.IntN(batchEvery) == 0 {
			jobs[i] = job{key: key, batch: newBatchPlan(g.rng, users)}
			continue
		}
		from := fundingWallet
		if i >= len(users) && g.rng.IntN(3) > 0 {
			from = users[g.rng.IntN(len(users))]
		}
		to := users[g.rng.IntN(len(users))]
		for to == from {
			to = users[g.rng.IntN(len(users))]
		}
		amount := int64(1 + g.rng.IntN(100))
		if from == fundingWallet {
			amount *= 10
		}
		jobs[i] = job{key: key, req: systemtest.TransferRequest{FromWalletID: from, ToWalletID: to, Amount: amount, Currency: currency}}
		g.res.Amounts[key] = amount
	}
	interval := duration / time.Duration(max(total, 1))
	work := make(chan job)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				g.send(ctx, c, j)
			}
		}()
	}
	ticker := time.NewTicker(max(interval, time.Microsecond))
	defer ticker.Stop()
	for _, j := range jobs {
		select {
		case <-ctx.Done():
		case <-ticker.C:
		}
		work <- j
	}
	close(work)
	wg.Wait()
	g.res.Requests, g.res.Retried = g.reqs.Load(), g.retried.Load()
	return g.res
}

// job is one movement the load asks for: a transfer, or a reversal of the transfer asked for
// under the key reverses.
type job struct {
	key      string
	reverses string
	forced   bool // a forced reversal
	hold     *holdPlan
	batch    *batchPlan
	req      systemtest.TransferRequest
}

func (g *loadGen) send(ctx context.Context, client int, j job) {
	if j.hold != nil {
		g.sendHold(ctx, client, j)
		return
	}
	if j.batch != nil {
		g.sendBatch(ctx, client, j)
		return
	}
	reverseID := ""
	if j.reverses != "" {
		g.mu.Lock()
		reverseID = g.res.Confirmed[j.reverses]
		if reverseID == "" {
			g.res.Skipped++
		}
		g.mu.Unlock()
		if reverseID == "" {
			return // its transfer was refused or is not answered yet
		}
	}
	resp, ok := g.untilAnswered(ctx, client, func(c *systemtest.Client) (systemtest.Response, error) {
		return g.post(ctx, c, j, reverseID)
	}, func(resp systemtest.Response) bool {
		var tr systemtest.Transfer
		return resp.Status == http.StatusUnprocessableEntity ||
			(resp.Status == http.StatusOK || resp.Status == http.StatusCreated) && resp.Decode(&tr) == nil
	})
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if resp.Status == http.StatusUnprocessableEntity {
		g.res.Refused++
		return
	}
	var tr systemtest.Transfer
	_ = resp.Decode(&tr) // decoded once already
	g.res.Confirmed[j.key] = tr.ID
}

// untilAnswered sends a request with do until final says its response is the answer, as a
// careful client does: the same request (and Idempotency-Key) again, to another wallet
// instance when one does not answer, for 90 s at most. ok is false when it gave up (counted).
func (g *loadGen) untilAnswered(ctx context.Context, client int, do func(*systemtest.Client) (systemtest.Response, error),
	final func(systemtest.Response) bool) (resp systemtest.Response, ok bool) {
	deadline := time.Now().Add(90 * time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			g.retried.Add(1)
			time.Sleep(min(time.Duration(attempt)*50*time.Millisecond, time.Second))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			g.mu.Lock()
			g.res.GaveUp++
			g.mu.Unlock()
			return systemtest.Response{}, false
		}
		g.reqs.Add(1)
		sent := time.Now()
		resp, err := do(g.targets[(client+attempt)%len(g.targets)])
		a := Attempt{Sent: sent, Took: time.Since(sent)}
		if err == nil {
			a.Status = resp.Status
		}
		g.mu.Lock()
		g.res.Attempts = append(g.res.Attempts, a)
		g.mu.Unlock()
		if err == nil && final(resp) {
			return resp, true
		}
	}
}

// post sends j once: a transfer, or a reversal of transfer reverseID.
func (g *loadGen) post(ctx context.Context, target *systemtest.Client, j job, reverseID string) (systemtest.Response, error) {
	switch {
	case reverseID != "" && j.forced:
		return target.ForceReverse(ctx, j.key, reverseID, j.req.Amount)
	case reverseID != "":
		return target.Reverse(ctx, j.key, reverseID, j.req.Amount)
	}
	return target.Transfer(ctx, j.key, j.req)
}
