// Package signing owns the signatures of events and the keys that make them: a service's
// signing key and its key files, and the trust a consumer verifies events against.
//
// Anyone who can publish on a producer's subject could otherwise make its consumer apply an
// event, so each relay signs the exact bytes it publishes (the outbox row's envelope) with its
// service's Ed25519 key, and each consumer verifies them against the public keys of the one
// producer it trusts for its event type before anything is applied. An event that is
// unsigned, badly signed or signed by another service is recorded failed, reason
// unauthenticated, and never applied.
//
// Signing and verifying use curve25519-voi (crypto/ed25519's keys and signatures, about twice
// as fast): a signature is RFC 8032's, deterministic, the same bytes crypto/ed25519 makes; a
// consumer verifies with RFC 8032's cofactored equation (FIPS 186-5), a fetched batch at once
// (VerifyAll: one multi-scalar multiplication for the batch, each message alone only when the
// batch fails). The cofactored and cofactorless equations differ only for signatures made on
// purpose with small-order points, which only a holder of a trusted private key can make.
package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	voied "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"walletgl/internal/events/contract"
)

// The message headers that carry the signature: the signing key's id and the Ed25519 signature
// of the message body, base64 (standard, padded).
const (
	HeaderKeyID     = "Walletgl-Key-Id"
	HeaderSignature = "Walletgl-Signature"
)

// KeyID is the id of an event signing key: the first 16 hex digits of the SHA-256 of its raw
// 32-byte Ed25519 public key. Consumers find the key a message names by it.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// PublicKey is a producer's public key as a consumer trusts it: the service it names and its id.
type PublicKey struct {
	Service string
	ID      string
	Key     ed25519.PublicKey
}

// Key is a service's private event signing key.
type Key struct {
	pub PublicKey
	key ed25519.PrivateKey
}

// GenerateKey returns a new signing key of service (contract.SourceWallet or contract.SourceGL).
func GenerateKey(service string) (*Key, error) {
	if err := checkService(service); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return newKey(service, priv), nil
}

func newKey(service string, priv ed25519.PrivateKey) *Key {
	pub := priv.Public().(ed25519.PublicKey)
	return &Key{pub: PublicKey{Service: service, ID: KeyID(pub), Key: pub}, key: priv}
}

// Public is the key's public half, as the consumers of its service's events trust it.
func (k *Key) Public() PublicKey { return k.pub }

// Service is the service the key signs for.
func (k *Key) Service() string { return k.pub.Service }

// Sign sets msg's signature headers over its body, replacing any there were.
func (k *Key) Sign(msg *nats.Msg) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header.Set(HeaderKeyID, k.pub.ID)
	msg.Header.Set(HeaderSignature, base64.StdEncoding.EncodeToString(voied.Sign(voied.PrivateKey(k.key), msg.Data)))
}

// Trust is what a consumer verifies events against: the public keys of the producers it
// accepts, several per producer while a key is rotated. An insecure Trust (AcceptUnsigned)
// verifies nothing.
type Trust struct {
	keys     map[string]PublicKey                // by key id
	expanded map[string]*voied.ExpandedPublicKey // the same keys, decompressed once for verifying
	insecure bool
}

// verifyOptions is how signatures are verified, alone and in batches: RFC 8032's cofactored
// equation, canonical encodings (FIPS 186-5).
var verifyOptions = &voied.Options{Verify: voied.VerifyOptionsFIPS_186_5}

// NewTrust returns the trust of keys. A key id given twice must be the same key.
func NewTrust(keys ...PublicKey) (*Trust, error) {
	t := &Trust{keys: make(map[string]PublicKey, len(keys)), expanded: make(map[string]*voied.ExpandedPublicKey, len(keys))}
	for _, k := range keys {
		if prev, ok := t.keys[k.ID]; ok && (prev.Service != k.Service || !prev.Key.Equal(k.Key)) {
			return nil, fmt.Errorf("trusted key %s is given twice, for %s and %s", k.ID, prev.Service, k.Service)
		}
		if KeyID(k.Key) != k.ID {
			return nil, fmt.Errorf("trusted key of %s: id %s is not its key's (%s)", k.Service, k.ID, KeyID(k.Key))
		}
		expanded, err := voied.NewExpandedPublicKey(voied.PublicKey(k.Key))
		if err != nil {
			return nil, fmt.Errorf("trusted key %s of %s: %w", k.ID, k.Service, err)
		}
		t.keys[k.ID], t.expanded[k.ID] = k, expanded
	}
	return t, nil
}

// AcceptUnsigned is the trust of EVENTS_INSECURE_UNSIGNED=true without trusted keys: every
// event is taken as its producer's, signed or not. Never in production.
func AcceptUnsigned() *Trust { return &Trust{insecure: true} }

// Insecure reports whether t accepts events without verifying them.
func (t *Trust) Insecure() bool { return t.insecure }

// Has reports whether t holds a key of service.
func (t *Trust) Has(service string) bool {
	for _, k := range t.keys {
		if k.Service == service {
			return true
		}
	}
	return false
}

// Verify checks that body was signed by producer with one of its trusted keys, as the headers
// say. Its errors are contract.Unauthenticated.
func (t *Trust) Verify(producer string, body []byte, h nats.Header) error {
	return t.VerifyAll(producer, []Signed{{Body: body, Header: h}})[0]
}

// Signed is a message as VerifyAll takes it: its body and its headers.
type Signed struct {
	Body   []byte
	Header nats.Header
}

// VerifyAll verifies msgs as one batch: errs[i] is msgs[i]'s error, contract.Unauthenticated, or
// nil when it was signed by producer with one of its trusted keys, as its headers say. A batch
// costs about a third of verifying its signatures one by one; one bad signature in it has every
// message of the batch verified alone, so that the others are still accepted. A single signature is
// verified alone.
func (t *Trust) VerifyAll(producer string, msgs []Signed) []error {
	errs := make([]error, len(msgs))
	if t.insecure {
		return errs
	}
	type signed struct {
		msg     int // index into msgs
		keyID   string
		sig     []byte
		message []byte
	}
	var entries []signed
	for i, m := range msgs {
		id, sig, err := t.signature(producer, m.Header)
		if err != nil {
			errs[i] = err
			continue
		}
		entries = append(entries, signed{msg: i, keyID: id, sig: sig, message: m.Body})
	}
	switch len(entries) {
	case 0:
		return errs
	case 1: // a batch of one costs more than verifying it alone
		e := entries[0]
		if !voied.VerifyExpandedWithOptions(t.expanded[e.keyID], e.message, e.sig, verifyOptions) {
			errs[e.msg] = mismatch(e.keyID)
		}
		return errs
	}
	batch := voied.NewBatchVerifierWithCapacity(len(entries))
	for _, e := range entries {
		batch.AddExpandedWithOptions(t.expanded[e.keyID], e.message, e.sig, verifyOptions)
	}
	if ok, valid := batch.Verify(nil); !ok {
		for j, e := range entries {
			if !valid[j] {
				errs[e.msg] = mismatch(e.keyID)
			}
		}
	}
	return errs
}

// signature returns the id of the trusted key of producer that h names and the signature it
// carries, or why the message cannot be producer's.
func (t *Trust) signature(producer string, h nats.Header) (id string, sig []byte, err error) {
	id, encoded := h.Get(HeaderKeyID), h.Get(HeaderSignature)
	if id == "" && encoded == "" {
		return "", nil, contract.Unauthenticated(errors.New("the event is unsigned"))
	}
	key, ok := t.keys[id]
	if !ok {
		return "", nil, contract.Unauthenticated(fmt.Errorf("signed with key %q, which is not trusted", id))
	}
	if key.Service != producer {
		return "", nil, contract.Unauthenticated(fmt.Errorf("signed by %s (key %s), but only %s publishes these events", key.Service, id, producer))
	}
	sig, err = base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", nil, contract.Unauthenticated(fmt.Errorf("the signature of key %s is not a base64 Ed25519 signature", id))
	}
	return id, sig, nil
}

func mismatch(id string) error {
	return contract.Unauthenticated(fmt.Errorf("the signature of key %s does not match the event's bytes", id))
}

// The key files `<service> events keygen DIR` writes, and the services read
// (EVENTS_SIGNING_KEY_FILE, EVENTS_TRUSTED_KEYS): a PEM block, the private key PKCS#8 and the
// public key PKIX (as `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout` write
// them), preceded by two lines of explanatory text (RFC 7468 lets it stand before a block, and
// openssl reads past it): "Service: <service>", the service the key signs for, and
// "Key-Id: <KeyID>", checked against the key when read. A key made with openssl is used by
// writing the Service line above it.
const (
	labelService = "Service"
	labelKeyID   = "Key-Id"
)

// KeyFiles are the paths of a service's key pair in dir: <service>.key and <service>.pub.
func KeyFiles(dir, service string) (private, public string) {
	return filepath.Join(dir, service+".key"), filepath.Join(dir, service+".pub")
}

// WriteKeyFiles writes k into dir as KeyFiles name them (the private key mode 0600), creating
// dir (0700) when missing. It never overwrites a key file.
func WriteKeyFiles(dir string, k *Key) (private, public string, err error) {
	private, public = KeyFiles(dir, k.pub.Service)
	der, err := x509.MarshalPKCS8PrivateKey(k.key)
	if err != nil {
		return "", "", fmt.Errorf("encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(k.pub.Key)
	if err != nil {
		return "", "", fmt.Errorf("encode public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create key directory: %w", err)
	}
	for _, path := range []string{private, public} {
		if _, err := os.Lstat(path); err == nil {
			return "", "", fmt.Errorf("%s exists: a key file is never overwritten (move it away, or choose another directory)", path)
		}
	}
	if err := writeNew(private, 0o600, k.pub, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		return "", "", err
	}
	if err := writeNew(public, 0o644, k.pub, &pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}); err != nil {
		_ = os.Remove(private)
		return "", "", err
	}
	return private, public, nil
}

func writeNew(path string, mode os.FileMode, pub PublicKey, block *pem.Block) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write key file: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s: %s\n%s: %s\n", labelService, pub.Service, labelKeyID, pub.ID)
	if err == nil {
		err = pem.Encode(f, block)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	return nil
}

// ReadKey reads a private key file.
func ReadKey(path string) (*Key, error) {
	block, labels, err := readKeyFile(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key file %s: a %T, not an Ed25519 key", path, parsed)
	}
	k := newKey(labels[labelService], priv)
	if err := checkKeyID(path, labels, k.pub.ID); err != nil {
		return nil, err
	}
	return k, nil
}

// ReadPublicKey reads a public key file.
func ReadPublicKey(path string) (PublicKey, error) {
	block, labels, err := readKeyFile(path, "PUBLIC KEY")
	if err != nil {
		return PublicKey{}, err
	}
	parsed, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("key file %s: %w", path, err)
	}
	pub, ok := parsed.(ed25519.PublicKey)
	if !ok {
		return PublicKey{}, fmt.Errorf("key file %s: a %T, not an Ed25519 key", path, parsed)
	}
	k := PublicKey{Service: labels[labelService], ID: KeyID(pub), Key: pub}
	if err := checkKeyID(path, labels, k.ID); err != nil {
		return PublicKey{}, err
	}
	return k, nil
}

// readKeyFile returns the file's PEM block of blockType and the "Name: value" lines before it.
func readKeyFile(path, blockType string) (*pem.Block, map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read key file: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != blockType {
		return nil, nil, fmt.Errorf("key file %s: no PEM block %q", path, blockType)
	}
	preamble, _, _ := strings.Cut(string(raw), "-----BEGIN ")
	labels := map[string]string{}
	for line := range strings.Lines(preamble) {
		if name, value, ok := strings.Cut(line, ":"); ok {
			labels[strings.TrimSpace(name)] = strings.TrimSpace(value)
		}
	}
	if err := checkService(labels[labelService]); err != nil {
		return nil, nil, fmt.Errorf("key file %s: its line %q above the key: %w", path, labelService+": …", err)
	}
	return block, labels, nil
}

func checkKeyID(path string, labels map[string]string, id string) error {
	if got, ok := labels[labelKeyID]; ok && got != id {
		return fmt.Errorf("key file %s: %s %s is not its key's id %s", path, labelKeyID, got, id)
	}
	return nil
}

func checkService(service string) error {
	if known := []string{contract.SourceWallet, contract.SourceGL}; !slices.Contains(known, service) {
		return fmt.Errorf("service %q is none of %s", service, strings.Join(known, ", "))
	}
	return nil
}
