package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// standingPull is the first consumer loop's source of messages: one subscription with a pull
// request always open at the broker (jetstream's Consume), so an event that arrives is pushed
// to the loop at once, where a fetch per batch cost a subscription, a pull request and an
// unsubscription at the broker and in this process for every batch. At a few hundred events a
// second a batch holds one or two events, and those three messages were most of what the
// broker did for them (docs/decisions/0012-consumer-loops-standing-pull-and-batch-acks.md).
//
// The broker sends at most size messages beyond what the loop has taken, and the loop takes
// them as batches of at most size (next), so at most about twice size messages are held here,
// and each is handled well inside its ack wait unless the loop itself is stalled (a database
// away for longer than the ack wait); then the broker delivers them again, and the inbox
// recognises the second copy. What the loop did not take when it stops is handed back to the
// broker (stop).
type standingPull struct {
	cc   jetstream.ConsumeContext
	msgs chan jetstream.Msg
	lost chan error    // the consumer or the connection is gone: stop and start again
	done chan struct{} // closed by stop
}

// startStandingPull opens cons's standing pull of at most size messages.
func startStandingPull(cons jetstream.Consumer, size int) (*standingPull, error) {
	s := &standingPull{
		msgs: make(chan jetstream.Msg, size),
		lost: make(chan error, 1),
		done: make(chan struct{}),
	}
	cc, err := cons.Consume(s.deliver,
		jetstream.PullMaxMessages(size),
		jetstream.PullExpiry(standingPullExpiry),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if pullLost(err) {
				select {
				case s.lost <- err:
				default:
				}
			}
		}))
	if err != nil {
		return nil, fmt.Errorf("consume: %w", err)
	}
	s.cc = cc
	return s, nil
}

// deliver runs on the subscription's goroutine for each message: it waits for room in msgs, so
// the broker is sent no further pull while the loop is behind, and hands the message back once
// the pull is stopped.
func (s *standingPull) deliver(msg jetstream.Msg) {
	select {
	case s.msgs <- msg:
	case <-s.done:
		_ = msg.NakWithDelay(handBackDelay)
	}
}

// pullLost says whether err from a standing pull means it will deliver nothing more: the
// broker deleted or does not know the consumer, or the connection is closed. Missed heartbeats
// and reconnects are not: jetstream's Consume pulls again by itself.
func pullLost(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrConnectionClosed)
}

// next returns the next batch: the messages held now, up to size, or else the first to
// arrive within wait followed by those that came with it; none when wait passes or ctx ends.
// An error says the pull is lost (pullLost) and must be started again.
func (s *standingPull) next(ctx context.Context, size int, wait time.Duration) ([]jetstream.Msg, error) {
	var first jetstream.Msg
	select {
	case first = <-s.msgs:
	default:
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case first = <-s.msgs:
		case err := <-s.lost:
			return nil, fmt.Errorf("standing pull: %w", err)
		case <-s.cc.Closed():
			return nil, errors.New("standing pull: closed")
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
	msgs := []jetstream.Msg{first}
	for len(msgs) < size {
		select {
		case msg := <-s.msgs:
			msgs = append(msgs, msg)
		default:
			return msgs, nil
		}
	}
	return msgs, nil
}

// standingPullExpiry is how long each pull request of a standing pull lasts; Consume asks
// again as one ends, and expects the broker's heartbeat every half of it. A pull request the
// broker drops without a word (nats-server 2.9 does when the consumer's leader moves in a
// cluster) is noticed by the heartbeats it no longer brings: with Consume's default of 30 s
// the loop then took nothing for 30 s (the nats-cluster fault scenario on 2.9 took 42–45 s
// against 11–18 s), with 2 s it is noticed within 2 s. Idle, a request every 2 s and a
// heartbeat a second cost no more than the fetch a second that came before.
const standingPullExpiry = 2 * time.Second

// handBackDelay is how long after a stopped pull hands a message back the broker delivers it
// again. A nak travels apart from the unsubscription that ends the pull, and a message
// redelivered at once can still go to the stopped pull's open request, where nobody reads it
// and it waits for the ack wait (seen in TestAStoppedLoopHandsBackTheEventsItHeldBeforeTheAckWait: the
// first message handed back did, every time). Once the request has expired, it is gone
// whether or not the broker checks the interest in it.
const handBackDelay = standingPullExpiry + time.Second

// stop ends the pull and hands what the loop did not take back to the broker (a nak each), to
// be delivered again within handBackDelay rather than after the ack wait. A nil pull (none
// started) has nothing to stop.
func (s *standingPull) stop() {
	if s == nil {
		return
	}
	close(s.done)
	s.cc.Drain() // unsubscribes, then passes what the connection holds already to deliver
	select {     // the subscription's last delivery has returned
	case <-s.cc.Closed():
	case <-time.After(5 * time.Second):
	}
	for {
		select {
		case msg := <-s.msgs:
			_ = msg.NakWithDelay(handBackDelay)
		default:
			return
		}
	}
}
