package envtest

import (
	"testing"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/signing"
)

// EventKeys are a test's event signing keys: a new key pair of each service, written into a
// directory of the test as `<service> events keygen` writes them, and the trust of both.
type EventKeys struct {
	Dir        string
	Wallet, GL *signing.Key
	Trust      *signing.Trust // trusts both services' keys, each for its own events
}

// NewEventKeys makes the test's event keys.
func NewEventKeys(t testing.TB) EventKeys {
	t.Helper()
	k := EventKeys{Dir: t.TempDir()}
	var pubs []signing.PublicKey
	for _, service := range []string{contract.SourceWallet, contract.SourceGL} {
		key, err := signing.GenerateKey(service)
		if err != nil {
			t.Fatalf("event keys: %v", err)
		}
		if _, _, err := signing.WriteKeyFiles(k.Dir, key); err != nil {
			t.Fatalf("event keys: %v", err)
		}
		pubs = append(pubs, key.Public())
		if service == contract.SourceWallet {
			k.Wallet = key
		} else {
			k.GL = key
		}
	}
	trust, err := signing.NewTrust(pubs...)
	if err != nil {
		t.Fatalf("event keys: %v", err)
	}
	k.Trust = trust
	return k
}

// Signer is the key of service (contract.SourceWallet or contract.SourceGL).
func (k EventKeys) Signer(service string) *signing.Key {
	if service == contract.SourceGL {
		return k.GL
	}
	return k.Wallet
}

// Env is the environment of service with these keys: its own private key, and the public key
// of the other service, whose events it consumes.
func (k EventKeys) Env(service string) []string {
	other := contract.SourceGL
	if service == contract.SourceGL {
		other = contract.SourceWallet
	}
	return signing.KeyEnv(k.Dir, service, other)
}
