package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit: one transaction, and so one commit and one WAL flush, serves many transfers.
// A transaction per request caps the API far below what PostgreSQL sustains, because every
// request waits for its own flush; with batching, requests that arrive while a batch commits
// wait together for the next one.

// BatchConfig sizes the batcher. The zero value means the defaults.
type BatchConfig struct {
	// MaxSize is the most transfer requests one transaction takes.
	MaxSize int
	// Workers is how many batches may be committing at once. With none committing, a batch
	// starts as soon as a request waits; while one commits, a further one starts only once
	// SplitAt requests wait (or MaxSize, if smaller), or the oldest has waited SplitAfter.
	Workers int
	// SplitAt is how many waiting requests start a batch beside one already committing
	// (DefaultBatchSplitAt). Fewer wait for that one to finish and then go together: on a
	// machine whose cores are busy, two transactions of a few transfers each cost nearly twice
	// the CPU of one holding them all, and commit no sooner.
	SplitAt int
	// SplitAfter bounds that wait (DefaultBatchSplitAfter): a batch slow to commit (waiting
	// for a row lock, say) does not hold the requests behind it for longer.
	SplitAfter time.Duration
}

// The batcher's defaults.
const (
	DefaultBatchMaxSize    = 256
	DefaultBatchWorkers    = 2
	DefaultBatchSplitAt    = 32
	DefaultBatchSplitAfter = 20 * time.Millisecond
)

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxSize <= 0 {
		c.MaxSize = DefaultBatchMaxSize
	}
	if c.Workers <= 0 {
		c.Workers = DefaultBatchWorkers
	}
	if c.SplitAt <= 0 {
		c.SplitAt = DefaultBatchSplitAt
	}
	c.SplitAt = min(c.SplitAt, c.MaxSize)
	if c.SplitAfter <= 0 {
		c.SplitAfter = DefaultBatchSplitAfter
	}
	return c
}

// batchWriteFunc writes one batch and answers each of its requests, by index, as soon as that
// request's answer is known: a batch that falls back to one transaction per request need not
// keep the first ones waiting for the last.
type batchWriteFunc[Req, Res any] func(ctx context.Context, batch []Req, answer func(i int, res Res, err error))

// errUnanswered is the answer of a request its batch's write function left unanswered.
var errUnanswered = errors.New("the batch finished without answering this request")

// batcher is the scheduling half of group commit, knowing nothing of what a batch writes: it
// queues requests while run runs and hands each free worker whatever queued meanwhile (at most
// MaxSize) as one call of its write function, whose answers go back to the waiting callers.
type batcher[Req, Res any] struct {
	cfg   BatchConfig
	write batchWriteFunc[Req, Res]

	mu      sync.Mutex
	running bool
	queue   []*batchCall[Req, Res]
	wake    chan struct{} // one token: the queue may have grown, or a batch finished
	writing atomic.Int32  // batches being written
}

// batchCall is one request waiting in the batcher, and the way its answer comes back.
type batchCall[Req, Res any] struct {
	req    Req
	queued time.Time
	// abandoned is set when the caller stopped waiting; a batch not yet started leaves it out.
	abandoned atomic.Bool
	answered  atomic.Bool
	done      chan batchAnswer[Res] // buffered: the answer never waits for the caller
}

type batchAnswer[Res any] struct {
	res Res
	err error
}

func (c *batchCall[Req, Res]) answer(res Res, err error) {
	if c.answered.CompareAndSwap(false, true) {
		c.done <- batchAnswer[Res]{res, err}
	}
}

func newBatcher[Req, Res any](cfg BatchConfig, write batchWriteFunc[Req, Res]) *batcher[Req, Res] {
	return &batcher[Req, Res]{cfg: cfg.withDefaults(), write: write, wake: make(chan struct{}, 1)}
}

// do hands req to the next batch and waits for its answer. ok is false when run is not
// running: the caller then writes req itself. When ctx ends first, do returns ctx's error; the
// batch may still write req if it has started.
func (b *batcher[Req, Res]) do(ctx context.Context, req Req) (res Res, ok bool, err error) {
	c := &batchCall[Req, Res]{req: req, queued: time.Now(), done: make(chan batchAnswer[Res], 1)}
	if !b.enqueue(c) {
		return res, false, nil
	}
	select {
	case a := <-c.done:
		return a.res, true, a.err
	case <-ctx.Done():
		c.abandoned.Store(true)
		return res, true, ctx.Err()
	}
}

// status reports whether run is taking requests and how many wait for a batch.
func (b *batcher[Req, Res]) status() (running bool, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running, len(b.queue)
}

// run batches requests until ctx is cancelled: each batch is one call of the write function,
// at most Workers at once. On cancellation run stops taking requests (do then reports that
// none runs), writes what is queued and returns once every request it took has its answer.
func (b *batcher[Req, Res]) run(ctx context.Context) error {
	if err := b.start(); err != nil {
		return err
	}
	// Batches finish even after ctx is cancelled: their callers are waiting for the answer.
	batchCtx := context.WithoutCancel(ctx)
	slots := make(chan struct{}, b.cfg.Workers)
	var wg sync.WaitGroup
	launch := func(batch []*batchCall[Req, Res]) {
		b.writing.Add(1)
		wg.Go(func() {
			defer func() {
				b.writing.Add(-1)
				<-slots
				b.signal()
			}()
			b.runBatch(batchCtx, batch)
		})
	}
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return b.drain(slots, launch, &wg)
		}
		batch := b.next(ctx)
		if batch == nil {
			<-slots
			return b.drain(slots, launch, &wg)
		}
		launch(batch)
	}
}

// drain answers every request queued before the batcher stopped taking new ones.
func (b *batcher[Req, Res]) drain(slots chan struct{}, launch func([]*batchCall[Req, Res]), wg *sync.WaitGroup) error {
	b.stop()
	for {
		batch := b.take()
		if batch == nil {
			break
		}
		slots <- struct{}{}
		launch(batch)
	}
	wg.Wait()
	return nil
}

// runBatch writes the requests of batch whose callers still wait, and answers each of them.
func (b *batcher[Req, Res]) runBatch(ctx context.Context, batch []*batchCall[Req, Res]) {
	live := slices.DeleteFunc(batch, func(c *batchCall[Req, Res]) bool { return c.abandoned.Load() })
	if len(live) == 0 {
		return
	}
	reqs := make([]Req, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	b.write(ctx, reqs, func(i int, res Res, err error) { live[i].answer(res, err) })
	for _, c := range live {
		var zero Res
		c.answer(zero, errUnanswered) // a no-op for every request the write function answered
	}
}

func (b *batcher[Req, Res]) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running {
		return errors.New("run transfer batcher: already running")
	}
	b.running = true
	return nil
}

func (b *batcher[Req, Res]) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running = false
}

// enqueue hands c to the batcher; false means no batcher runs.
func (b *batcher[Req, Res]) enqueue(c *batchCall[Req, Res]) bool {
	b.mu.Lock()
	if !b.running {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	b.signal()
	return true
}

// signal wakes next: the queue grew, or a batch finished.
func (b *batcher[Req, Res]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// next waits for queued requests and takes up to MaxSize of them once they may start a batch
// (due); nil when ctx ends first.
func (b *batcher[Req, Res]) next(ctx context.Context) []*batchCall[Req, Res] {
	for {
		batch, wait := b.takeDue()
		if batch != nil {
			return batch
		}
		if !b.waitForMore(ctx, wait) {
			return nil
		}
	}
}

// waitForMore waits until the queue may have grown or a batch finished, or for wait (when
// above zero); false when ctx ended.
func (b *batcher[Req, Res]) waitForMore(ctx context.Context, wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-b.wake:
	case <-timeout:
	case <-ctx.Done():
		return false
	}
	return true
}

// takeDue takes a batch if the queued requests may start one: any request when no batch is
// being written, else SplitAt of them or one that has waited SplitAfter. Otherwise it says how
// long until the oldest has waited that long (0: the queue is empty).
func (b *batcher[Req, Res]) takeDue() ([]*batchCall[Req, Res], time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return nil, 0
	}
	if b.writing.Load() > 0 && len(b.queue) < b.cfg.SplitAt {
		if waited := time.Since(b.queue[0].queued); waited < b.cfg.SplitAfter {
			return nil, b.cfg.SplitAfter - waited
		}
	}
	return b.takeLocked(), 0
}

// take removes up to MaxSize requests from the queue, oldest first; nil when it is empty.
func (b *batcher[Req, Res]) take() []*batchCall[Req, Res] {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked()
}

func (b *batcher[Req, Res]) takeLocked() []*batchCall[Req, Res] {
	n := min(len(b.queue), b.cfg.MaxSize)
	if n == 0 {
		return nil
	}
	batch := b.queue[:n:n]
	if n == len(b.queue) {
		b.queue = nil
	} else {
		b.queue = slices.Clone(b.queue[n:])
	}
	return batch
}
