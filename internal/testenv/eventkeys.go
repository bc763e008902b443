package testenv

import (
	"testing"

	"walletgl/internal/config"
	"walletgl/internal/events"
)

// EventKeys are a test's event signing keys: a new key pair of each service, written into a
// directory of the test as `<service> events keygen` writes them, and the trust of both.
type EventKeys struct {
	Dir        string
	Wallet, GL *events.SigningKey
	Trust      *events.Trust // trusts both services' keys, each for its own events
}

// NewEventKeys makes the test's event keys.
func NewEventKeys(t testing.TB) EventKeys {
	t.Helper()
	k := EventKeys{Dir: t.TempDir()}
	var pubs []events.PublicKey
	for _, service := range []string{events.SourceWallet, events.SourceGL} {
		key, err := events.GenerateKey(service)
		if err != nil {
			t.Fatalf("event keys: %v", err)
		}
		if _, _, err := events.WriteKeyFiles(k.Dir, key); err != nil {
			t.Fatalf("event keys: %v", err)
		}
		pubs = append(pubs, key.Public())
		if service == events.SourceWallet {
			k.Wallet = key
		} else {
			k.GL = key
		}
	}
	trust, err := events.NewTrust(pubs...)
	if err != nil {
		t.Fatalf("event keys: %v", err)
	}
	k.Trust = trust
	return k
}

// Signer is the key of service (events.SourceWallet or events.SourceGL).
func (k EventKeys) Signer(service string) *events.SigningKey {
	if service == events.SourceGL {
		return k.GL
	}
	return k.Wallet
}

// Env is the environment of service with these keys: its own private key, and the public key
// of the other service, whose events it consumes.
func (k EventKeys) Env(service string) []string {
	other := events.SourceGL
	if service == events.SourceGL {
		other = events.SourceWallet
	}
	return config.EventKeyEnv(k.Dir, service, other)
}
