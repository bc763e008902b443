package main

import (
	"bytes"
	"fmt"
	"time"
)

// envelopeTime has a fixed width, so that every envelope without padding has the same size.
const envelopeTime = "2006-01-02T15:04:05.000000Z07:00"

// MinPayloadBytes is the size of an envelope without padding.
var MinPayloadBytes = len(envelope("00000000-0000-0000-0000-000000000000", time.Time{}, 0))

// envelope is a TransferCompleted.v1 in our CloudEvents envelope (internal/events.Envelope),
// with id as event and transfer id, padded with trailing spaces (still valid JSON, which
// Watermill's default payload column requires) to size bytes.
func envelope(id string, at time.Time, size int) []byte {
	ts := at.UTC().Format(envelopeTime)
	b := fmt.Appendf(make([]byte, 0, max(size, 512)),
		`{"specversion":"1.0","id":%q,"source":"wallet","type":"TransferCompleted.v1","subject":%q,"time":%q,"datacontenttype":"application/json",`+
			`"data":{"transfer_id":%q,"from_wallet_id":"u1","to_wallet_id":"u2","amount":42,"currency":"USD","created_at":%q}}`,
		id, id, ts, id, ts)
	if pad := size - len(b); pad > 0 {
		b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	}
	return b
}
