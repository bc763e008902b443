// Package faults holds the named fault points compiled into both binaries for game days and
// the fault-injection harness. They are inert unless the FAULTS variable arms them, and an
// unarmed point costs one map lookup on a nil set.
//
// FAULTS is a comma-separated list of point:action[@probability], for example
//
//	FAULTS=gl.consumer.after_commit:crash@0.05,wallet.relay.publish_twice:duplicate
//
// Actions: crash (the process kills itself with SIGKILL, as kill -9 would), error (the step
// fails with ErrInjected), delay=DURATION (the step sleeps), duplicate (the step is done twice,
// where the point supports it). Probability defaults to 1. FAULTS_SEED makes the draws
// repeatable.
package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The fault points. Each is named where it sits; docs/faults.md lists them for operators.
const (
	TransferAfterCommit  = "wallet.transfer.after_commit" // transfer committed, response not sent
	RelayAfterPublish    = ".relay.after_publish"         // prefixed by the source: PubAck in hand, row not yet dispatched
	RelayPublishTwice    = ".relay.publish_twice"         // prefixed by the source: every message published twice
	ConsumerBeforeCommit = ".consumer.before_commit"      // prefixed by the consumer: batch handled, not committed
	ConsumerAfterCommit  = ".consumer.after_commit"       // prefixed by the consumer: committed, broker not acked
)

// ErrInjected is the error an "error" action returns.
var ErrInjected = errors.New("injected fault")

type rule struct {
	action      string
	delay       time.Duration
	probability float64
}

// Set is the armed fault points of a process. A nil *Set has none.
type Set struct {
	mu    sync.Mutex
	rng   *rand.Rand
	rules map[string]rule
}

// Parse reads a FAULTS specification; an empty one gives a nil set.
func Parse(spec string, seed uint64) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	s := &Set{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rules: map[string]rule{}}
	for _, item := range strings.Split(spec, ",") {
		point, act, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok || point == "" {
			return nil, fmt.Errorf("FAULTS: %q is not point:action[@probability]", item)
		}
		r := rule{probability: 1}
		if a, p, ok := strings.Cut(act, "@"); ok {
			prob, err := strconv.ParseFloat(p, 64)
			if err != nil || prob < 0 || prob > 1 {
				return nil, fmt.Errorf("FAULTS: probability %q of %s is not between 0 and 1", p, point)
			}
			act, r.probability = a, prob
		}
		name, arg, _ := strings.Cut(act, "=")
		switch name {
		case "crash", "error", "duplicate":
		case "delay":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return nil, fmt.Errorf("FAULTS: delay of %s: %w", point, err)
			}
			r.delay = d
		default:
			return nil, fmt.Errorf("FAULTS: unknown action %q for %s (crash, error, delay=D, duplicate)", name, point)
		}
		r.action = name
		s.rules[point] = r
	}
	return s, nil
}

func (s *Set) draw(point string) (rule, bool) {
	if s == nil {
		return rule{}, false
	}
	r, ok := s.rules[point]
	if !ok {
		return rule{}, false
	}
	s.mu.Lock()
	fire := s.rng.Float64() < r.probability
	s.mu.Unlock()
	return r, fire
}

// Hit passes the fault point: nothing happens unless it is armed and its draw fires. A crash
// does not return; an error action returns ErrInjected; a delay sleeps.
func (s *Set) Hit(point string) error {
	r, fire := s.draw(point)
	if !fire {
		return nil
	}
	switch r.action {
	case "crash":
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL cannot be caught; wait for it to land
	case "error":
		return fmt.Errorf("%s: %w", point, ErrInjected)
	case "delay":
		time.Sleep(r.delay)
	}
	return nil
}

// Duplicate reports whether the point's "duplicate" action fires this time.
func (s *Set) Duplicate(point string) bool {
	r, fire := s.draw(point)
	return fire && r.action == "duplicate"
}
