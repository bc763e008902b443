package signing

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"walletgl/internal/config"
)

// Settings name a service's event keys: its private key, the public keys of the producers
// whose events it accepts, and the escape hatch for running without them.
type Settings struct {
	KeyFile          string
	TrustedKeys      string // comma-separated public key files
	InsecureUnsigned bool
}

// Bind declares the signing settings.
func (c *Settings) Bind(s *config.Set) {
	s.String(&c.KeyFile, "EVENTS_SIGNING_KEY_FILE", "signing-key-file", "", "this service's private event signing key, DIR/<service>.key of `<service> events keygen DIR`: every event it publishes is signed with it (required by serve)")
	s.String(&c.TrustedKeys, "EVENTS_TRUSTED_KEYS", "trusted-keys", "", "comma-separated public key files (DIR/<service>.pub) of the producers whose events this service accepts: the other service's, two of it while its key is rotated (required by serve and gl replay)")
	s.OptIn(&c.InsecureUnsigned, "EVENTS_INSECURE_UNSIGNED", "insecure-unsigned", "run without EVENTS_SIGNING_KEY_FILE / EVENTS_TRUSTED_KEYS: events go out unsigned, and without trusted keys anyone who can publish on the broker can make this service apply an event (never in production; warned at every start)")
}

// KeyEnv is the environment that gives service the key pairs `events keygen dir` wrote: its
// own private key, and the public keys of the producers it trusts.
func KeyEnv(dir, service string, trusted ...string) []string {
	private, _ := KeyFiles(dir, service)
	pubs := make([]string, len(trusted))
	for i, producer := range trusted {
		_, pubs[i] = KeyFiles(dir, producer)
	}
	return []string{"EVENTS_SIGNING_KEY_FILE=" + private, "EVENTS_TRUSTED_KEYS=" + strings.Join(pubs, ",")}
}

// Keys are a service's event keys as its settings name them.
type Keys struct {
	// Signer signs the events the service publishes; nil: they go out unsigned
	// (EVENTS_INSECURE_UNSIGNED without EVENTS_SIGNING_KEY_FILE).
	Signer *Key
	// Trust verifies the events it consumes (AcceptUnsigned with EVENTS_INSECURE_UNSIGNED and no
	// EVENTS_TRUSTED_KEYS).
	Trust *Trust
}

// keygenHint tells how to make the keys a setting misses.
const keygenHint = "make them with `%s events keygen DIR`, or set EVENTS_INSECURE_UNSIGNED=true to run without (never in production)"

// Keys reads the keys of service, which consumes the events of producer; sign=false reads only
// the trusted keys (a replay publishes nothing). Both are required unless
// EVENTS_INSECURE_UNSIGNED=true, which log hears of at every call: a missing signing key means
// unsigned events, missing trusted keys mean events accepted unverified. Keys given are used
// either way.
func (c Settings) Keys(service, producer string, sign bool, log zerolog.Logger) (Keys, error) {
	var k Keys
	var errs, insecure []string
	if sign {
		signer, err := c.signer(service)
		switch {
		case err != nil:
			errs = append(errs, err.Error())
		case signer == nil:
			insecure = append(insecure, "events are published unsigned: consumers that verify refuse them")
		}
		k.Signer = signer
	}
	trust, err := c.trust(service, producer)
	switch {
	case err != nil:
		errs = append(errs, err.Error())
	case trust.Insecure():
		insecure = append(insecure, fmt.Sprintf("events are accepted unverified: anyone who can publish on %s's subjects can make %s apply an event", producer, service))
	}
	k.Trust = trust
	if len(errs) > 0 {
		return Keys{}, fmt.Errorf("configuration: signed events: %s", strings.Join(errs, "; "))
	}
	for _, msg := range insecure {
		log.Warn().Bool("events_insecure_unsigned", true).Msg("EVENTS_INSECURE_UNSIGNED: " + msg)
	}
	return k, nil
}

// signer reads service's private key; nil without one under EVENTS_INSECURE_UNSIGNED.
func (c Settings) signer(service string) (*Key, error) {
	switch {
	case c.KeyFile != "":
		key, err := ReadKey(c.KeyFile)
		switch {
		case err != nil:
			return nil, fmt.Errorf("EVENTS_SIGNING_KEY_FILE: %w", err)
		case key.Service() != service:
			return nil, fmt.Errorf("EVENTS_SIGNING_KEY_FILE %s is %s's key, not %s's", c.KeyFile, key.Service(), service)
		}
		return key, nil
	case c.InsecureUnsigned:
		return nil, nil
	}
	return nil, fmt.Errorf("EVENTS_SIGNING_KEY_FILE is not set: "+keygenHint, service)
}

// trust reads the public keys service verifies producer's events with; AcceptUnsigned without
// any under EVENTS_INSECURE_UNSIGNED.
func (c Settings) trust(service, producer string) (*Trust, error) {
	switch {
	case c.TrustedKeys != "":
		var keys []PublicKey
		var errs []string
		for path := range strings.SplitSeq(c.TrustedKeys, ",") {
			if path = strings.TrimSpace(path); path == "" {
				continue
			}
			key, err := ReadPublicKey(path)
			if err != nil {
				errs = append(errs, fmt.Sprintf("EVENTS_TRUSTED_KEYS: %v", err))
				continue
			}
			keys = append(keys, key)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		trust, err := NewTrust(keys...)
		switch {
		case err != nil:
			return nil, fmt.Errorf("EVENTS_TRUSTED_KEYS: %w", err)
		case !trust.Has(producer):
			return nil, fmt.Errorf("EVENTS_TRUSTED_KEYS holds no key of %s, whose events %s consumes: add %s.pub of `%s events keygen`", producer, service, producer, producer)
		}
		return trust, nil
	case c.InsecureUnsigned:
		return AcceptUnsigned(), nil
	}
	return nil, fmt.Errorf("EVENTS_TRUSTED_KEYS is not set: "+keygenHint, producer)
}
