// Package admin owns the operator's view of a service's outbox and inbox tables: counts and
// the oldest waiting rows, listings and pages, the last errors, and the ways out for rows that
// are stuck (requeue, reconcile, republish). Both binaries' commands, the console and the
// wallet's admin endpoints use it; it needs the database alone, never the broker.
package admin
