// Package events owns the path an event takes between the two services, in both directions:
// the versioned envelope and the event contracts, the JetStream topology, the transactional
// outbox and its relay, and the inbox with the consumer loop that feeds a handler exactly once.
package events
