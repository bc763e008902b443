// Command devrun is `make run`: both services in the foreground against the local PostgreSQL
// and NATS, their logs interleaved and labelled, with a line of its own for each step (migrate
// and keys, start, ready at which URLs). Where no NATS server answers, it runs a
// JetStream server of its own (store under .run/nats) for as long as it runs. Before the
// services start, it migrates their databases and makes (or reuses) a local API key with admin
// for each, printing them as one line: export WALLET_API_KEY=… GL_API_KEY=…, a GL key with
// ledger:read and metrics:read only that the wallet calls the GL with, and an event
// signing key pair for each under .run/events (`<service> events keygen`), which it gives the
// services (EVENTS_SIGNING_KEY_FILE, EVENTS_TRUSTED_KEYS).
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devrun:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) != 2 {
		return errors.New("usage: devrun <wallet binary> <gl binary>")
	}
	natsURL := getenv("NATS_URL")
	if natsURL == "" {
		natsURL = nats.DefaultURL
	}
	if !natsAnswers(natsURL) {
		srv, err := startNATS(natsURL, stdout)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
	}
	out := &labelledWriter{w: stdout}
	env := os.Environ()
	if getenv("LOG_FORMAT") == "" {
		// The services write to a pipe, so their "auto" would pick JSON: ask for the console
		// format where a person reads devrun's output, and for colours only on a terminal.
		env = append(env, "LOG_FORMAT="+consoleFormat(stdout))
	}
	bins := map[string]string{"wallet": args[0], "gl": args[1]}
	out.say("migrating the databases and making the local API and event signing keys…")
	keys, err := ensureKeys(ctx, bins, env)
	if err != nil {
		return fmt.Errorf("set up local API keys: %w", err)
	}
	eventKeys, err := ensureEventKeys(ctx, bins, env)
	if err != nil {
		return fmt.Errorf("set up local event signing keys: %w", err)
	}
	// One line for people and scripts alike (scripts read it from here): the keys of the
	// README's try-it session, each with admin on its service.
	fmt.Fprintf(stdout, "export WALLET_API_KEY=%s GL_API_KEY=%s\n", keys[walletAdminKey], keys[glAdminKey])
	printConsoles(stdout, getenv)
	// The wallet's console traces transfers through the GL's API with a GL key of its own,
	// which only reads.
	serviceEnv := map[string][]string{"wallet": {"GL_API_KEY=" + keys[walletGLKey]}}
	out.say("starting wallet (%s serve) and gl (%s serve)…", args[0], args[1])
	out.say("%s", devMachineWarnings)
	urls := serviceURLs(getenv)
	g, gctx := errgroup.WithContext(ctx)
	for i, bin := range args {
		service := []string{"wallet", "gl"}[i]
		label := []string{"wallet", "gl    "}[i]
		g.Go(func() error {
			return runService(gctx, bin, label, slices.Concat(env, eventKeys[service], serviceEnv[service]), out)
		})
	}
	g.Go(func() error {
		if waitReady(gctx, urls...) {
			out.say("ready at %s (wallet) and %s (gl); Ctrl-C stops both", urls[0], urls[1])
		}
		return nil
	})
	return g.Wait()
}

// devMachineWarnings explains the warnings both services log at start on a developer machine,
// where make run's defaults meet a local PostgreSQL.
const devMachineWarnings = "the services warn below of one database role for migrations and service, of a superuser and of " +
	"autovacuum off: expected on a developer machine, harmless here, and what to set in production " +
	"(docs/development.md#the-warnings-of-make-run)"

// say prints a line of devrun's own, labelled as the services' lines are.
func (l *labelledWriter) say(format string, args ...any) {
	l.line("devrun", fmt.Sprintf(format, args...))
}

// serviceURLs are the base URLs of the wallet's and the GL's HTTP APIs.
func serviceURLs(getenv func(string) string) []string {
	addr := func(name, def string) string {
		if a := getenv(name); a != "" {
			return a
		}
		return def
	}
	scheme := func(cert string) string {
		if getenv(cert) != "" {
			return "https"
		}
		return "http"
	}
	return []string{
		scheme("WALLET_TLS_CERT") + "://" + addr("WALLET_HTTP_ADDR", "127.0.0.1:8080"),
		scheme("GL_TLS_CERT") + "://" + addr("GL_HTTP_ADDR", "127.0.0.1:8081"),
	}
}

// readyPoll is how often waitReady asks each service's /readyz.
const readyPoll = 200 * time.Millisecond

// waitReady polls each URL's /readyz until every one answers 200, and reports whether they all
// did before ctx ended.
func waitReady(ctx context.Context, urls ...string) bool {
	// A local probe of a local service, whose development certificate is self-signed.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local probe, no data
	}}
	defer client.CloseIdleConnections()
	ticker := time.NewTicker(readyPoll)
	defer ticker.Stop()
	for _, u := range urls {
		for !ready(ctx, client, u+"/readyz") {
			select {
			case <-ctx.Done():
				return false
			case <-ticker.C:
			}
		}
	}
	return true
}

// ready reports whether url answers 200.
func ready(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// printConsoles prints where each service's operator console is and which key opens it.
func printConsoles(stdout io.Writer, getenv func(string) string) {
	urls := serviceURLs(getenv)
	fmt.Fprintf(stdout, "console: %s/console/ (wallet: log in with $WALLET_API_KEY)  %s/console/ (gl: log in with $GL_API_KEY)\n", urls[0], urls[1])
}

// consoleFormat is the log format for the services' output as devrun shows it on stdout:
// coloured console lines on a terminal, plain console lines into a file or pipe.
func consoleFormat(stdout io.Writer) string {
	if f, ok := stdout.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return "console"
	}
	return "console-plain"
}

func natsAnswers(url string) bool {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return false
	}
	nc.Close()
	return true
}

// startNATS runs a JetStream server on the address of natsURL (the first, if it lists several).
func startNATS(natsURL string, stdout io.Writer) (*server.Server, error) {
	first, _, _ := strings.Cut(natsURL, ",")
	u, err := url.Parse(first)
	if err != nil {
		return nil, fmt.Errorf("parse NATS_URL: %w", err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 4222
	}
	srv, err := server.NewServer(&server.Options{
		Host: u.Hostname(), Port: port, JetStream: true, StoreDir: ".run/nats", NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("start nats: not ready after 10s")
	}
	fmt.Fprintf(stdout, "devrun | no NATS answered: started a JetStream server on %s (store .run/nats)\n", srv.ClientURL())
	return srv, nil
}

// runService runs one service until ctx ends, then stops it with SIGTERM (graceful shutdown).
func runService(ctx context.Context, bin, label string, env []string, out *labelledWriter) error {
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		scanner := bufio.NewScanner(pipe)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		for scanner.Scan() {
			out.line(label, scanner.Text())
		}
	}()
	done := make(chan error, 1)
	go func() { <-copied; done <- cmd.Wait() }()
	select {
	case err := <-done:
		return fmt.Errorf("%s exited: %w", label, err)
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		return nil
	}
}

type labelledWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *labelledWriter) line(label, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s | %s\n", label, text)
}
