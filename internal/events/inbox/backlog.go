package inbox

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// backlogGate tells a consumer's extra loops whether there is work for them. The first loop
// always takes events (from its standing pull); the others fetch only while the consumer is
// behind (a batch came back full, or its last message said more were waiting). Caught up, a
// second loop would only split a trickle of events into batches of one, and on a busy machine
// each batch costs about as much as the events in it: two loops taking turns at one event each
// cost nearly twice the CPU of one loop taking both.
type backlogGate struct {
	mu     sync.Mutex
	behind bool
	opened chan struct{} // closed when behind becomes true; replaced when it becomes false
}

func newBacklogGate() *backlogGate {
	return &backlogGate{opened: make(chan struct{})}
}

// set records what the last fetch said.
func (g *backlogGate) set(behind bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case behind && !g.behind:
		close(g.opened)
	case !behind && g.behind:
		g.opened = make(chan struct{})
	}
	g.behind = behind
}

// wait returns once the consumer is behind, or false when ctx ends first.
func (g *backlogGate) wait(ctx context.Context) bool {
	g.mu.Lock()
	opened := g.opened
	g.mu.Unlock()
	select {
	case <-opened:
		return true
	case <-ctx.Done():
		return false
	}
}

// fetchedBehind says whether a fetch of size messages left more waiting: it came back full,
// or the broker counted messages pending after its last one.
func fetchedBehind(msgs []jetstream.Msg, size int) bool {
	return len(msgs) > 0 && (len(msgs) >= size || pendingAfter(msgs))
}

// pendingAfter says whether the broker had messages for the consumer beyond the last of msgs
// when it delivered that one. A message whose metadata cannot be read says yes: asking costs
// a pull request, guessing wrong leaves events waiting for the next round.
func pendingAfter(msgs []jetstream.Msg) bool {
	meta, err := msgs[len(msgs)-1].Metadata()
	return err != nil || meta.NumPending > 0
}
