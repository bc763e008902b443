package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"walletgl/internal/metadata"
	"walletgl/internal/money"
)

// Event types, with their version. The subject of a message ends in its type.
const (
	// TypeTransferCompleted is the first version of the wallet's transfer event, without the
	// transfer's kind; the GL still accepts it, upcast (DecodeTransferCompleted), and the
	// wallet publishes only deposits as v1 (TransferEventTypeFor).
	TypeTransferCompleted = "TransferCompleted.v1"
	// TypeTransferCompletedV2 adds the transfer's kind and the payer's reference: the event the
	// wallet publishes by default (WALLET_TRANSFER_EVENT_VERSION).
	TypeTransferCompletedV2 = "TransferCompleted.v2"
	// TypeTransferReversed is the wallet's event of a reversal: part or all of a completed
	// transfer moved back. The GL's consumer takes it beside TransferCompleted.v1.
	TypeTransferReversed = "TransferReversed.v1"
	// TypeTransferPosted is the acknowledgment of one posting, as GLs before TransferPosted.v2
	// published it; the wallet still accepts it (TransferPostings).
	TypeTransferPosted = "TransferPosted.v1"
	// TypeTransferPostedV2 is the acknowledgment the GL publishes: every posting of one consumer
	// batch in one event, so one signature, one message and one wallet inbox row per batch.
	TypeTransferPostedV2 = "TransferPosted.v2"
)

// Sources: the service that owns a stream and writes its outbox.
const (
	SourceWallet = "wallet"
	SourceGL     = "gl"
)

// Envelope is the body of every message: the CloudEvents 1.0 structured JSON format.
type Envelope struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject,omitempty"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`
	// TraceParent is not part of the body: the consumer sets it, for the handler, to the
	// traceparent of the span of the transaction applying the event, so that an event the
	// handler writes in answer (outbox.Event.TraceParent) continues the trace. Empty: untraced.
	TraceParent string `json:"-"`
}

// DecodeEnvelope parses and checks a message body.
func DecodeEnvelope(body []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Envelope{}, Permanent(fmt.Errorf("decode envelope: %w", err))
	}
	switch {
	case env.SpecVersion != "1.0":
		return env, Permanent(fmt.Errorf("unsupported specversion %q", env.SpecVersion))
	case env.ID == "":
		return env, Permanent(errors.New("envelope has no id"))
	case env.Type == "":
		return env, Permanent(errors.New("envelope has no type"))
	case len(env.Data) == 0:
		return env, Permanent(errors.New("envelope has no data"))
	}
	return env, nil
}

// DecodeData parses the envelope's data into v, rejecting unknown fields' absence of nothing:
// a body that does not parse is permanent.
func (e Envelope) DecodeData(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return Permanent(fmt.Errorf("decode %s data: %w", e.Type, err))
	}
	return nil
}

// knownCurrency reports whether c is an upper-case ISO 4217 code: an event in any other
// currency can never be posted (the GL's reports could not say what its amounts mean).
func knownCurrency(c string) bool { return money.Valid(c) }

// Kinds of a transfer (TransferCompleted.v2), from the allow_negative flags of its wallets:
// an allow-negative wallet stands for money outside the system.
const (
	KindUnspecified = "unspecified" // a TransferCompleted.v1, which does not say
	KindDeposit     = "deposit"     // from an allow-negative (external) wallet
	KindTransfer    = "transfer"    // between two customers' wallets
	KindWithdrawal  = "withdrawal"  // to an allow-negative (external) wallet
)

// TransferKind is the kind of a transfer between wallets with these allow_negative flags. A
// transfer between two external wallets counts as a deposit: money enters as it is credited.
func TransferKind(fromAllowsNegative, toAllowsNegative bool) string {
	switch {
	case fromAllowsNegative:
		return KindDeposit
	case toAllowsNegative:
		return KindWithdrawal
	}
	return KindTransfer
}

// MaxReferenceLength bounds a transfer's reference, in characters (as JSON Schema's maxLength
// and PostgreSQL's char_length count).
const MaxReferenceLength = 140

// TransferCompleted is the wallet's event: money moved between two wallets. It is the shape of
// TransferCompleted.v2; a v1 is the same without Kind and Reference (omitted when empty), and
// decodes with Kind KindUnspecified (DecodeTransferCompleted).
type TransferCompleted struct {
	TransferID   string `json:"transfer_id"`
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Kind         string `json:"kind,omitempty"`
	Reference    string `json:"reference,omitempty"`
	// Metadata are the client's key-value pairs (internal/metadata), optional: absent when
	// the transfer has none, so a v2 event without them reads as before.
	Metadata  metadata.Metadata `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// AsVersion is the data of t as event type TypeTransferCompleted (v1: without kind, reference
// and metadata) or TypeTransferCompletedV2 (as it is).
func (t TransferCompleted) AsVersion(eventType string) TransferCompleted {
	if eventType == TypeTransferCompleted {
		t.Kind, t.Reference, t.Metadata = "", "", nil
	}
	return t
}

// TransferEventTypeFor is the type a transfer of kind is published as when the wallet is set to
// publish published (WALLET_TRANSFER_EVENT_VERSION): a TransferCompleted.v1 is posted by the
// deposit rule (debit cash, credit what is owed), so it carries only a deposit exactly; every
// other kind, and every transfer when v2 is published, goes as TransferCompleted.v2.
func TransferEventTypeFor(published, kind string) string {
	if published == TypeTransferCompleted && kind == KindDeposit {
		return TypeTransferCompleted
	}
	return TypeTransferCompletedV2
}

// DecodeTransferCompleted reads a transfer event of either version, checked: a
// TransferCompleted.v1 is upcast to the v2 shape with kind KindUnspecified; a v2 must name one
// of the v2 kinds. Any other type (TransferCompleted.v9 included) is permanent.
func DecodeTransferCompleted(env Envelope) (TransferCompleted, error) {
	var data TransferCompleted
	switch env.Type {
	case TypeTransferCompleted:
		if err := env.DecodeData(&data); err != nil {
			return data, err
		}
		data.Kind, data.Reference, data.Metadata = KindUnspecified, "", nil
	case TypeTransferCompletedV2:
		if err := env.DecodeData(&data); err != nil {
			return data, err
		}
		if data.Kind != KindDeposit && data.Kind != KindTransfer && data.Kind != KindWithdrawal {
			return data, Permanent(fmt.Errorf("event %s: kind %q is not deposit, transfer or withdrawal", env.ID, data.Kind))
		}
	default:
		return data, Permanent(fmt.Errorf("event %s: type %q is no transfer event this consumer knows", env.ID, env.Type))
	}
	if err := data.Validate(); err != nil {
		return data, fmt.Errorf("validate event %s: %w", env.ID, err)
	}
	return data, nil
}

// Validate reports why the event can never be posted, as a permanent error.
func (t TransferCompleted) Validate() error {
	switch {
	case t.TransferID == "":
		return Permanent(errors.New("transfer_id is empty"))
	case t.FromWalletID == "" || t.ToWalletID == "":
		return Permanent(errors.New("wallet ids are empty"))
	case t.Amount <= 0:
		return Permanent(fmt.Errorf("amount %d is not positive", t.Amount))
	case !knownCurrency(t.Currency):
		return Permanent(fmt.Errorf("currency %q is not an ISO 4217 currency code", t.Currency))
	case t.CreatedAt.IsZero():
		return Permanent(errors.New("created_at is missing"))
	case utf8.RuneCountInString(t.Reference) > MaxReferenceLength:
		return Permanent(fmt.Errorf("reference of %d characters exceeds %d", utf8.RuneCountInString(t.Reference), MaxReferenceLength))
	}
	if err := t.Metadata.Validate(); err != nil {
		return Permanent(fmt.Errorf("metadata: %w", err))
	}
	return nil
}

// TransferReversed is the wallet's event of a reversal: Amount of transfer TransferID moved
// back. FromWalletID and ToWalletID are the reversal's direction (the original's receiver and
// sender); ReversalID is the movement's own id, the transfer_id of its GL entry.
type TransferReversed struct {
	ReversalID   string `json:"reversal_id"`
	TransferID   string `json:"transfer_id"`
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	// Metadata are the client's key-value pairs of the reversal (internal/metadata),
	// optional: absent when it has none, so an event without them reads as before.
	Metadata  metadata.Metadata `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}

// Validate reports why the event can never be posted, as a permanent error.
func (t TransferReversed) Validate() error {
	if t.ReversalID == "" || t.ReversalID == t.TransferID {
		return Permanent(fmt.Errorf("reversal_id %q is empty or the transfer's own id", t.ReversalID))
	}
	return TransferCompleted{
		TransferID: t.TransferID, FromWalletID: t.FromWalletID, ToWalletID: t.ToWalletID,
		Amount: t.Amount, Currency: t.Currency, Metadata: t.Metadata, CreatedAt: t.CreatedAt,
	}.Validate()
}

// TransferPosted is the GL's acknowledgment: the transfer's journal entry is committed. For a
// reversal, TransferID is the reversal's id and SourceEventID its TransferReversed event.
type TransferPosted struct {
	TransferID    string    `json:"transfer_id"`
	SourceEventID string    `json:"source_event_id"`
	EntryID       string    `json:"entry_id"`
	PostedAt      time.Time `json:"posted_at"`
}

// Validate reports why the acknowledgment can never be applied, as a permanent error.
func (t TransferPosted) Validate() error {
	if t.TransferID == "" || t.SourceEventID == "" {
		return Permanent(errors.New("transfer_id or source_event_id is empty"))
	}
	return nil
}

// MaxPostingsPerEvent bounds a TransferPosted.v2: the GL splits a larger batch's acknowledgment
// into several, so that a message stays far below the broker's 1 MB default payload limit
// (a posting is about 170 bytes of JSON).
const MaxPostingsPerEvent = 1000

// TransferPostings is the data of TransferPosted.v2: the postings of one GL batch, each as a
// TransferPosted.v1 would name it.
type TransferPostings struct {
	Postings []TransferPosted `json:"postings"`
}

// Validate reports why the acknowledgment can never be applied, as a permanent error.
func (t TransferPostings) Validate() error {
	if len(t.Postings) == 0 || len(t.Postings) > MaxPostingsPerEvent {
		return Permanent(fmt.Errorf("postings: %d, want 1 to %d", len(t.Postings), MaxPostingsPerEvent))
	}
	for i, p := range t.Postings {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("posting %d: %w", i, err)
		}
	}
	return nil
}

// DecodePostings reads the postings an acknowledgment names, of either version: a
// TransferPosted.v1 is upcast to the one posting it names. Its errors are permanent.
func DecodePostings(env Envelope) ([]TransferPosted, error) {
	var postings TransferPostings
	switch env.Type {
	case TypeTransferPosted:
		var one TransferPosted
		if err := env.DecodeData(&one); err != nil {
			return nil, err
		}
		postings.Postings = []TransferPosted{one}
	case TypeTransferPostedV2:
		if err := env.DecodeData(&postings); err != nil {
			return nil, err
		}
	default:
		return nil, Permanent(fmt.Errorf("event type %q is no acknowledgment", env.Type))
	}
	if err := postings.Validate(); err != nil {
		return nil, err
	}
	return postings.Postings, nil
}
