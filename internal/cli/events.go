package cli

import (
	"context"
	"errors"
	"fmt"

	"walletgl/internal/config"
	"walletgl/internal/events/signing"
)

// The event signing commands of both binaries: <program> events keygen DIR. Scripts depend on
// the files it writes, DIR/<program>.key (private, 0600: the service's EVENTS_SIGNING_KEY_FILE)
// and DIR/<program>.pub (for the other service's EVENTS_TRUSTED_KEYS), and on keygen --json:
// {"service","key_id","private_key_file","public_key_file"}.

// Events is the group `<program> events …`.
func (svc Service[S]) Events() Command {
	return Command{Name: "events", Sub: []Command{
		{Name: "keygen", Help: "a new event signing key pair: DIR/<service>.key (private, 0600) and DIR/<service>.pub; never overwrites: DIR [--json]", RunFunc: svc.eventsKeygen},
	}}
}

func (svc Service[S]) eventsKeygen(_ context.Context, env Env, args []string) error {
	var asJSON bool
	_, rest, err := svc.Parse(env, args, func(s *config.Set) { JSONFlag(s, &asJSON) })
	if err != nil {
		return err
	}
	if len(rest) != 1 || rest[0] == "" {
		return errors.New("events keygen: give the directory to write the key pair into")
	}
	key, err := signing.GenerateKey(svc.Name)
	if err != nil {
		return fmt.Errorf("events keygen: %w", err)
	}
	private, public, err := signing.WriteKeyFiles(rest[0], key)
	if err != nil {
		return fmt.Errorf("events keygen: %w", err)
	}
	if asJSON {
		return JSON(env.Stdout, struct {
			Service        string `json:"service"`
			KeyID          string `json:"key_id"`
			PrivateKeyFile string `json:"private_key_file"`
			PublicKeyFile  string `json:"public_key_file"`
		}{svc.Name, key.Public().ID, private, public})
	}
	fmt.Fprintf(env.Stdout, "%s event signing key %s\n", svc.Name, key.Public().ID)
	fmt.Fprintf(env.Stdout, "  private  %s  (%s's EVENTS_SIGNING_KEY_FILE; keep it secret)\n", private, svc.Name)
	fmt.Fprintf(env.Stdout, "  public   %s  (in EVENTS_TRUSTED_KEYS of the service that consumes %s's events)\n", public, svc.Name)
	return nil
}
