// Package contract owns what the two services agree on about an event, and what every
// audience of the events reads: the CloudEvents envelope and its decoding, the event types
// and their versions, the payloads with their validation and JSON Schemas, the producer of
// each type, the error kinds a handler answers with (Permanent, Conflict, NotYet) and the
// reason words a failed event is recorded with, and the statuses of the outbox and inbox
// rows. It imports nothing of this module: a domain package imports it and nothing else of
// internal/events.
package contract
