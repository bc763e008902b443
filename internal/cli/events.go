package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/config"
	"walletgl/internal/events"
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
		{Name: "setup", Help: "create or update the service's streams and durable consumer on the broker, with an operator's NATS credentials (NATS_USER, NATS_PASSWORD, …) [--json]", RunFunc: svc.eventsSetup},
	}}
}

// eventsSetup creates or updates the streams and the durable consumer the service needs
// (events.Topology.Setup) as the operator's NATS user, and prints what it did to each. Its
// --json is {"service","topology":[{"kind","name","action","changes":[…]}]}.
func (svc Service[S]) eventsSetup(ctx context.Context, env Env, args []string) error {
	var asJSON bool
	s, rest, err := svc.Parse(env, args, func(s *config.Set) { JSONFlag(s, &asJSON) })
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("events setup takes no arguments, got %q", rest)
	}
	log, err := s.Logging().Logger(env.Stderr, svc.Name)
	if err != nil {
		return err
	}
	ev := svc.EventsFunc(s)
	nc, err := ev.Broker.Connect(ctx, svc.Name+" events setup", events.OperatorUser, log)
	if err != nil {
		return fmt.Errorf("events setup: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("events setup: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	applied, err := ev.Topology.WithLog(log).Setup(ctx, js, svc.Name)
	if err != nil {
		return fmt.Errorf("events setup: %w", err)
	}
	if asJSON {
		return JSON(env.Stdout, struct {
			Service  string           `json:"service"`
			Topology []events.Applied `json:"topology"`
		}{svc.Name, applied})
	}
	for _, a := range applied {
		fmt.Fprintf(env.Stdout, "%-9s %-8s %s\n", a.Action, a.Kind, a.Name)
		for _, c := range a.Changes {
			fmt.Fprintf(env.Stdout, "          %s: %s -> %s\n", c.Setting, c.Running, c.Configured)
		}
	}
	return nil
}

// setupTimeout bounds events setup: a broker that does not answer (or a user without the
// rights, whose requests get no answer) fails it instead of hanging.
const setupTimeout = 30 * time.Second

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
