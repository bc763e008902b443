package postgres

// The batcher's scheduling, without a database: its write function is a fake the test holds.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// heldWrites is a write function that reports each batch as it starts and finishes it only
// when the test lets it: every request n is answered "n" unless answer says otherwise.
type heldWrites struct {
	started chan []int
	release chan struct{}
	answer  func(req int) (string, error, bool) // false: leave the request unanswered
}

func newHeldWrites() *heldWrites {
	return &heldWrites{started: make(chan []int, 100), release: make(chan struct{}, 100)}
}

func (h *heldWrites) write(_ context.Context, batch []int, answer func(int, string, error)) {
	h.started <- slices.Clone(batch)
	<-h.release
	for i, req := range batch {
		res, err, ok := fmt.Sprint(req), error(nil), true
		if h.answer != nil {
			res, err, ok = h.answer(req)
		}
		if ok {
			answer(i, res, err)
		}
	}
}

// nextBatch returns the next batch to start.
func (h *heldWrites) nextBatch(t *testing.T) []int {
	t.Helper()
	select {
	case batch := <-h.started:
		return batch
	case <-time.After(10 * time.Second):
		t.Fatal("no batch started")
		return nil
	}
}

type batcherBundle struct {
	b      *batcher[int, string]
	writes *heldWrites
	stop   context.CancelFunc
	done   chan error // run's result
}

// setupBatcher runs a batcher over held writes until the test ends (or calls stop).
func setupBatcher(t *testing.T, cfg BatchConfig) *batcherBundle {
	t.Helper()
	writes := newHeldWrites()
	bb := &batcherBundle{b: newBatcher(cfg, writes.write), writes: writes, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	bb.stop = cancel
	go func() {
		bb.done <- bb.b.run(ctx)
		close(bb.done) // a second receive, after the test's own, gets nil
	}()
	t.Cleanup(func() {
		cancel()
		close(writes.release) // nothing stays held
		require.NoError(t, <-bb.done)
	})
	require.Eventually(t, func() bool { running, _ := bb.b.status(); return running },
		10*time.Second, time.Millisecond)
	return bb
}

type batcherAnswer struct {
	res     string
	batched bool
	err     error
}

// call calls do from a goroutine of its own; the answer comes on the channel.
func (bb *batcherBundle) call(ctx context.Context, req int) <-chan batcherAnswer {
	ch := make(chan batcherAnswer, 1)
	go func() {
		res, batched, err := bb.b.do(ctx, req)
		ch <- batcherAnswer{res, batched, err}
	}()
	return ch
}

// submit calls do while every worker is busy, and returns once req is queued.
func (bb *batcherBundle) submit(t *testing.T, ctx context.Context, req int) <-chan batcherAnswer {
	t.Helper()
	_, before := bb.b.status()
	ch := bb.call(ctx, req)
	require.Eventually(t, func() bool { _, queued := bb.b.status(); return queued > before },
		10*time.Second, time.Millisecond, "want request %d queued", req)
	return ch
}

// hold occupies a free worker with a batch of req alone until releaseOne.
func (bb *batcherBundle) hold(t *testing.T, req int) (answer <-chan batcherAnswer) {
	t.Helper()
	answer = bb.call(context.Background(), req)
	require.Equal(t, []int{req}, bb.writes.nextBatch(t))
	return answer
}

// queue submits the requests first to last in order, each once the one before is queued.
func (bb *batcherBundle) queue(t *testing.T, first, last int) []<-chan batcherAnswer {
	t.Helper()
	var answers []<-chan batcherAnswer
	for req := first; req <= last; req++ {
		answers = append(answers, bb.submit(t, context.Background(), req))
	}
	return answers
}

func (bb *batcherBundle) releaseOne() { bb.writes.release <- struct{}{} }

// requireWritten checks that each of answers, the requests first and on, was written in a
// batch and answered with its own result.
func requireWritten(t *testing.T, answers []<-chan batcherAnswer, first int) {
	t.Helper()
	for i, ch := range answers {
		require.Equal(t, batcherAnswer{fmt.Sprint(first + i), true, nil}, receive(t, ch))
	}
}

func receive(t *testing.T, ch <-chan batcherAnswer) batcherAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return batcherAnswer{}
	}
}

func TestBatcherTakesWhatQueuedWhileItsWorkersWereBusyUpToMaxSize(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{MaxSize: 3, Workers: 1})
	held := bb.hold(t, 0)
	answers := bb.queue(t, 1, 7)
	_, queued := bb.b.status()
	require.Equal(t, 7, queued)

	bb.releaseOne()
	require.Equal(t, batcherAnswer{"0", true, nil}, receive(t, held))
	for _, want := range [][]int{{1, 2, 3}, {4, 5, 6}, {7}} {
		require.Equal(t, want, bb.writes.nextBatch(t), "oldest first, at most MaxSize")
		bb.releaseOne()
	}
	requireWritten(t, answers, 1)
}

func TestBatcherRunsAtMostWorkersBatchesAtOnce(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{MaxSize: 1, Workers: 2})
	first, second := bb.hold(t, 1), bb.hold(t, 2)
	third := bb.submit(t, context.Background(), 3)
	_, queued := bb.b.status()
	require.Equal(t, 1, queued, "both workers are busy: the third request waits")

	bb.releaseOne()
	require.Equal(t, []int{3}, bb.writes.nextBatch(t), "a worker is free")
	bb.releaseOne()
	bb.releaseOne()
	requireWritten(t, []<-chan batcherAnswer{first, second, third}, 1)
}

// A free worker does not start a batch of a few requests beside one being written: they wait
// for it to finish and go together, unless SplitAt of them wait.
func TestBatcherStartsASecondBatchOnlyWhenSplitAtRequestsWait(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{MaxSize: 10, Workers: 2, SplitAt: 3, SplitAfter: time.Hour})
	held := bb.hold(t, 0)
	few := bb.queue(t, 1, 2)
	select {
	case batch := <-bb.writes.started:
		t.Fatalf("batch %v started beside the one being written with 2 requests waiting, under SplitAt", batch)
	case <-time.After(100 * time.Millisecond):
	}
	more := []<-chan batcherAnswer{bb.call(context.Background(), 3)}
	require.Equal(t, []int{1, 2, 3}, bb.writes.nextBatch(t), "SplitAt requests wait: a second batch starts")

	late := bb.queue(t, 4, 5)
	bb.releaseOne()
	bb.releaseOne()
	require.Equal(t, batcherAnswer{"0", true, nil}, receive(t, held))
	require.Equal(t, []int{4, 5}, bb.writes.nextBatch(t), "with none being written, any request starts a batch")
	bb.releaseOne()
	requireWritten(t, append(append(few, more...), late...), 1)
}

// Behind a batch slow to commit, a request waits at most SplitAfter for a batch of its own.
func TestBatcherStartsASecondBatchForARequestThatWaitedSplitAfter(t *testing.T) {
	t.Parallel()
	const splitAfter = 200 * time.Millisecond
	bb := setupBatcher(t, BatchConfig{MaxSize: 10, Workers: 2, SplitAt: 10, SplitAfter: splitAfter})
	held := bb.hold(t, 0)
	queued := time.Now()
	waiting := bb.call(context.Background(), 1)
	require.Equal(t, []int{1}, bb.writes.nextBatch(t), "a batch of its own while the first is still being written")
	require.GreaterOrEqual(t, time.Since(queued), splitAfter, "not before it waited SplitAfter")
	bb.releaseOne()
	bb.releaseOne()
	requireWritten(t, []<-chan batcherAnswer{held, waiting}, 0)
}

func TestBatcherAnswersEachRequestWithItsOwnResult(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{Workers: 1})
	refused := errors.New("refused")
	bb.writes.answer = func(req int) (string, error, bool) {
		switch req {
		case 2:
			return "", refused, true
		case 3:
			return "", nil, false
		}
		return fmt.Sprintf("transfer %d", req), nil, true
	}
	held := bb.hold(t, 0)
	answers := bb.queue(t, 1, 4)
	bb.releaseOne()
	require.Equal(t, []int{1, 2, 3, 4}, bb.writes.nextBatch(t))
	bb.releaseOne()

	require.Equal(t, "transfer 0", receive(t, held).res)
	require.Equal(t, batcherAnswer{"transfer 1", true, nil}, receive(t, answers[0]))
	require.ErrorIs(t, receive(t, answers[1]).err, refused, "an error answers its request alone")
	require.ErrorIs(t, receive(t, answers[2]).err, errUnanswered, "a request the write left out is answered too")
	require.Equal(t, batcherAnswer{"transfer 4", true, nil}, receive(t, answers[3]))
}

func TestBatcherAnswersOnlyOnceWhateverTheWriteDoes(t *testing.T) {
	t.Parallel()
	b := newBatcher(BatchConfig{}, func(_ context.Context, batch []int, answer func(int, string, error)) {
		answer(0, "first", nil)
		answer(0, "second", nil) // must neither block nor replace the first
	})
	c := &batchCall[int, string]{req: 1, done: make(chan batchAnswer[string], 1)}
	b.runBatch(context.Background(), []*batchCall[int, string]{c})
	require.Equal(t, batchAnswer[string]{res: "first"}, <-c.done)
	require.Empty(t, c.done)
}

func TestStoppingTheBatcherAnswersEveryRequestItTook(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{MaxSize: 2, Workers: 1})
	held := bb.hold(t, 0)
	answers := bb.queue(t, 1, 5)

	bb.stop()
	require.Eventually(t, func() bool { running, _ := bb.b.status(); return !running }, 10*time.Second, time.Millisecond)
	_, batched, err := bb.b.do(context.Background(), 6)
	require.NoError(t, err)
	require.False(t, batched, "once stopped, the caller writes its request itself")
	select {
	case err := <-bb.done:
		t.Fatalf("run returned before answering its requests: %v", err)
	default:
	}

	bb.releaseOne()
	require.Equal(t, "0", receive(t, held).res)
	for _, want := range [][]int{{1, 2}, {3, 4}, {5}} {
		require.Equal(t, want, bb.writes.nextBatch(t), "what was queued is written after the stop")
		bb.releaseOne()
	}
	requireWritten(t, answers, 1)
	require.NoError(t, <-bb.done)
}

func TestACallerThatStopsWaitingIsLeftOutOfItsBatch(t *testing.T) {
	t.Parallel()
	bb := setupBatcher(t, BatchConfig{Workers: 1})
	held := bb.hold(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	impatient := bb.submit(t, ctx, 1)
	patient := bb.submit(t, context.Background(), 2)

	cancel()
	a := receive(t, impatient)
	require.ErrorIs(t, a.err, context.Canceled)
	require.True(t, a.batched, "it was queued: its batch may still write it")

	bb.releaseOne()
	require.Equal(t, "0", receive(t, held).res)
	require.Equal(t, []int{2}, bb.writes.nextBatch(t), "a batch not started yet leaves it out")
	bb.releaseOne()
	require.Equal(t, batcherAnswer{"2", true, nil}, receive(t, patient))
}

func TestBatcherOutsideRun(t *testing.T) {
	t.Parallel()
	b := newBatcher(BatchConfig{}, newHeldWrites().write)
	require.Equal(t, BatchConfig{MaxSize: DefaultBatchMaxSize, Workers: DefaultBatchWorkers,
		SplitAt: DefaultBatchSplitAt, SplitAfter: DefaultBatchSplitAfter}, b.cfg,
		"zero values are the defaults")
	require.Equal(t, 4, newBatcher(BatchConfig{MaxSize: 4}, newHeldWrites().write).cfg.SplitAt,
		"a full batch always starts one beside another")

	_, batched, err := b.do(context.Background(), 1)
	require.NoError(t, err)
	require.False(t, batched, "without run, the caller writes its request itself")

	bb := setupBatcher(t, BatchConfig{})
	require.ErrorContains(t, bb.b.run(context.Background()), "already running")
}
