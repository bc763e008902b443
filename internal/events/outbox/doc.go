// Package outbox owns the sending side of the events: the transactional outbox a service
// writes its events into within its business transaction, and the relay that publishes the
// rows to the service's stream, signed, marks and acknowledges them, publishes again what the
// stream lost, holds rows back while the stream's unread backlog fills its share, and deletes
// acknowledged rows past their retention.
package outbox
