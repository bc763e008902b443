// Package systemtest starts the real service binaries as processes, the way a user runs them, for
// the end-to-end tests and the fault-injection runs: build, start, wait until healthy, stop
// gracefully or kill -9.
package systemtest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries are the paths of the two built service binaries.
type Binaries struct {
	Wallet string
	GL     string
}

// Build compiles cmd/wallet and cmd/gl of module walletgl into dir.
func Build(ctx context.Context, dir string) (Binaries, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return Binaries{}, err
	}
	bins := Binaries{Wallet: filepath.Join(dir, "wallet"), GL: filepath.Join(dir, "gl")}
	for pkg, out := range map[string]string{"./cmd/wallet": bins.Wallet, "./cmd/gl": bins.GL} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		cmd.Dir = root
		if output, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("build %s: %w\n%s", pkg, err, output)
		}
	}
	return bins, nil
}

// ModuleRoot returns the directory of module walletgl, the product, from the working directory's
// module or workspace: the repository's root, also when the caller runs in the tooling module
// (tools/).
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "walletgl").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New("find module root: module walletgl has no directory")
	}
	return dir, nil
}

// FreeAddr returns a loopback address with a port nobody listens on right now, outside the
// kernel's ephemeral range (ListenFree).
func FreeAddr() (string, error) {
	ln, err := ListenFree()
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ListenFree listens on a free loopback port below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range). The harness restarts killed services and brokers
// on their port; a port from the ephemeral range could meanwhile be taken as the local end of
// any outgoing connection (a database or NATS client), and the restart would fail to bind.
func ListenFree() (net.Listener, error) {
	const lowest = 10000
	top := ephemeralLow()
	for range 200 {
		port := lowest + rand.N(top-lowest)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find free port: %w", err)
	}
	return ln, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when unknown).
func ephemeralLow() int {
	const fallback = 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return fallback
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 10000+1000 {
		return fallback
	}
	return low
}

// DatabaseURL returns the URL of the database name on the server of serverURL (a server's
// maintenance database URL).
func DatabaseURL(serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Service describes a service binary run as "serve" on a free loopback port: prefix is its
// settings' prefix ("WALLET" or "GL"), its output goes to dir/name.log, env is added.
func Service(name, bin, prefix, dbURL, dir string, env []string) (*Process, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	return &Process{
		Name: name, Bin: bin, Args: []string{"serve"}, Addr: addr, Log: filepath.Join(dir, name+".log"),
		Env: append([]string{prefix + "_DATABASE_URL=" + dbURL, prefix + "_HTTP_ADDR=" + addr}, env...),
	}, nil
}

// Process is one running binary (a service or a broker).
type Process struct {
	Name string
	Bin  string
	Args []string
	Env  []string // added to the harness's own environment
	Addr string   // its HTTP address, for health checks
	Log  string   // file that receives its output (appended across restarts)
	// HealthPath is what WaitHealthy asks at Addr ("/healthz" when empty).
	HealthPath string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current run ends
	exitErr error
}

// Start starts the process; it does not wait for it to be healthy.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.exited) {
		return fmt.Errorf("start %s: already running", p.Name)
	}
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// WaitHealthy polls GET /healthz (HealthPath) until it answers 200 or ctx ends.
func (p *Process) WaitHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	path := cmp.Or(p.HealthPath, "/healthz")
	return p.waitUntil(ctx, "healthy", func() error {
		resp, err := client.Get("http://" + p.Addr + path)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", path, resp.Status)
		}
		return nil
	})
}

// waitUntil calls ready every 50 ms until it returns nil, ctx ends or the process exits; what
// names the state waited for in the error, with ready's last error and the log's tail.
func (p *Process) waitUntil(ctx context.Context, what string, ready func() error) error {
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not %s: %w (last: %v)\n%s", p.Name, what, ctx.Err(), err, p.Tail(30))
		case <-p.Exited():
			return fmt.Errorf("%s exited before it was %s\n%s", p.Name, what, p.Tail(30))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after timeout). A non-zero exit
// is an error: the process did not shut down cleanly.
func (p *Process) Stop(timeout time.Duration) error {
	return p.signal(syscall.SIGTERM, timeout)
}

// Kill sends SIGKILL: the process gets no chance to finish anything.
func (p *Process) Kill() error {
	return p.signal(syscall.SIGKILL, 10*time.Second)
}

// Pause stops the process with SIGSTOP (it keeps its connections but does nothing); Resume
// continues it.
func (p *Process) Pause() error { return p.send(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *Process) Resume() error { return p.send(syscall.SIGCONT) }

func (p *Process) send(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.exited) {
		return fmt.Errorf("signal %s: not running", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

func (p *Process) signal(sig syscall.Signal, timeout time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || isClosed(exited) {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to handle SIGTERM
	_ = cmd.Process.Signal(sig)
	var timedOut bool
	select {
	case <-exited:
	case <-time.After(timeout):
		timedOut = true
		_ = cmd.Process.Kill()
		<-exited
	}
	p.mu.Lock()
	err := p.exitErr
	p.mu.Unlock()
	if sig == syscall.SIGKILL {
		return nil
	}
	if timedOut {
		return fmt.Errorf("%s did not stop within %s", p.Name, timeout)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return fmt.Errorf("%s exited: %w\n%s", p.Name, err, p.Tail(20))
	}
	return err
}

// PID is the operating system's id of the current run, 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.exited) {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.exited)
}

// Exited returns a channel closed when the current run of the process ends.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return p.exited
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
