// Package inbox owns the receiving side of the events: the consumer loop on a durable
// JetStream consumer, which verifies each message's signature and feeds the handler through
// the inbox, where each event is claimed, applied and marked processed in one transaction;
// the events that fail or wait for another, the operator's retry of them, the inbox's
// retention, and the replay of a stream.
package inbox
