package contract

// producers names the one service that may publish each event type.
var producers = map[string]string{
	TypeTransferCompleted:      SourceWallet,
	TypeTransferCompletedV2:    SourceWallet,
	TypeTransferReversed:       SourceWallet,
	TypeHoldPlaced:             SourceWallet,
	TypeHoldCaptured:           SourceWallet,
	TypeHoldVoided:             SourceWallet,
	TypeTransferBatchCompleted: SourceWallet,
	TypeTransferBatchReversed:  SourceWallet,
	TypeTransferPosted:         SourceGL,
	TypeTransferPostedV2:       SourceGL,
}

// Producer is the service that alone may publish events of eventType; "" for a type nobody
// produces.
func Producer(eventType string) string { return producers[eventType] }

// EventTypes lists every event type some service produces (the producers map), unordered.
func EventTypes() []string {
	types := make([]string, 0, len(producers))
	for t := range producers {
		types = append(types, t)
	}
	return types
}
