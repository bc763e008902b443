// Package events owns the path an event takes between the two services through the broker:
// the JetStream topology (the two streams, the two durable consumers, their limits and the
// permissions of each service's user) and the connection to NATS. Both sides of the delivery
// build on it; the packages beneath it split the rest by audience:
//
//   - contract: the envelope, the event types and payloads, the errors and reason words every
//     side speaks, and the statuses of the outbox and inbox rows (what the domain imports);
//   - signing: the signing keys, their files, and the trust a consumer verifies against;
//   - outbox: the transactional outbox and the relay that publishes it;
//   - inbox: the consumer loop, the inbox that applies each event once, and replay;
//   - admin: the operator's view of the outbox and inbox tables.
//
// Its own tests run the whole path: outbox, relay, broker, consumer and inbox together.
package events
