package testkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Backend names, as reported in Server.Backend.
const (
	BackendProcess  = "process"
	BackendExternal = "external"
)

// ErrUnsupported is wrapped by fault helpers on a backend that cannot inject the fault (external).
var ErrUnsupported = errors.New("not supported on this backend")

const (
	defaultStartTimeout        = 15 * time.Second
	defaultClusterStartTimeout = 30 * time.Second
	defaultDialTimeout         = 3 * time.Second
	defaultConnWriteTimeout    = 5 * time.Second
)

// Server is one standalone server (or one cluster node).
type Server struct {
	Addr    string // host:port
	Target  Target // the target asked for
	Flavor  Flavor // real flavor, from INFO server
	Version string // real version: valkey_version for Valkey, else redis_version
	Backend string // "process" | "container" | "external"

	inst instance
	base rueidis.ClientOption // credentials / TLS / DB of an external server; zero for a process

	mu        sync.Mutex
	admin     rueidis.Client
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// instance is what a backend controls of one running server: the fault-injection seam.
type instance interface {
	pid() int
	pause() error
	resume() error
	kill() error
	restart(ctx context.Context) error
	close() error
}

// backend provides servers: process, container (container.go: testcontainers-go, its instance
// implements pause/kill/restart through the Docker API) and external; select.go chooses one.
type backend interface {
	name() string
	launch(ctx context.Context, target Target, cfg *config) (*Server, error)
	launchCluster(ctx context.Context, target Target, cfg *config) (*Cluster, error)
}

// selectBackend is the backend COORDKIT_TESTKIT_BACKEND names, for a standalone server
// (cluster=false) or a cluster, without looking at a target: auto (the default) is external when
// COORDKIT_REDIS_URL (resp. COORDKIT_REDIS_CLUSTER_URL) is set, else process. Launch and
// LaunchCluster use resolveBackend (select.go), which also falls back to the container backend.
func selectBackend(cluster bool) backend {
	return envSelection(cluster).modeBackend()
}

// Launch provides a standalone server for target from the selected backend
// (COORDKIT_TESTKIT_BACKEND: process, container, external or auto; see README.md) and waits until it
// answers PING; Flavor and Version come from INFO server. The caller must Close it. The context
// bounds only the start, not the server's life.
func Launch(ctx context.Context, target Target, opts ...Option) (*Server, error) {
	return launchWith(ctx, resolveBackend(ctx, false, target), target, opts...)
}

func launchWith(ctx context.Context, b backend, target Target, opts ...Option) (*Server, error) {
	cfg := newConfig(defaultStartTimeout, opts)
	if len(cfg.networks) > 0 && b.name() != BackendContainer {
		return nil, fmt.Errorf("testkit: WithNetwork needs the container backend (%s=%s), not %s: %w: %w",
			EnvBackend, BackendContainer, b.name(), ErrUnsupported, ErrUnavailable)
	}
	return b.launch(ctx, target, cfg)
}

// Start is Launch for tests: the server is closed at t.Cleanup. When the server is unavailable
// (ErrUnavailable: no binary, unknown target) the test is skipped with the reason, or fails when
// CI=true; any other start failure fails the test.
func Start(t testing.TB, target Target, opts ...Option) *Server {
	t.Helper()
	s, err := Launch(context.Background(), target, opts...)
	if err != nil {
		FailOrSkip(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("testkit: closing %s server %s: %v", target, s.Addr, err)
		}
	})
	return s
}

// FailOrSkip ends the test t for err: skipped when err wraps [ErrUnavailable] (no server binary, no
// Docker engine, an external server of another kind) and CI is not "true" (EnvCI), failed otherwise, so
// that in CI a missing server is a failure. It never returns (t.Skipf and t.Fatalf stop the test's
// goroutine). Tests that start servers through [Launch] or [LaunchCluster] themselves call it with
// their error; [Start] and [StartCluster] call it for theirs.
func FailOrSkip(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrUnavailable) && !isCI() {
		t.Skipf("%v", err)
	}
	t.Fatalf("%v", err)
}

// fillInfo sets Flavor and Version from INFO server.
func (s *Server) fillInfo(ctx context.Context) error {
	msg, err := s.Do(ctx, "INFO", "server")
	if err != nil {
		return fmt.Errorf("testkit: INFO server on %s: %w", s.Addr, err)
	}
	txt, err := msg.ToString()
	if err != nil {
		return fmt.Errorf("testkit: INFO server on %s: %w", s.Addr, err)
	}
	s.Flavor, s.Version, err = flavorVersion(parseInfo(txt))
	return err
}

// Close stops the server (process backend: SIGTERM, then SIGKILL after 5s; the temporary
// directory is removed) and closes the admin client. Closing an external server only closes
// testkit's client. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		admin := s.admin
		s.admin = nil
		s.mu.Unlock()
		if admin != nil {
			admin.Close()
		}
		if s.inst != nil {
			s.closeErr = s.inst.close()
		}
	})
	return s.closeErr
}

// ClientOption returns options for a client of this server: InitAddress {Addr}, a single-node
// client (ForceSingleClient) and short timeouts suited to tests (Dialer.Timeout 3s,
// ConnWriteTimeout 5s, which also bounds rueidis' background PING, so a paused server's
// connections are dropped after about 5s). For an external server it keeps the URL's credentials,
// TLS and DB. Adjust the copy as needed.
func (s *Server) ClientOption() rueidis.ClientOption {
	opt := s.base
	opt.InitAddress = []string{s.Addr}
	opt.ForceSingleClient = true
	applyTestDefaults(&opt)
	return opt
}

func applyTestDefaults(opt *rueidis.ClientOption) {
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = defaultDialTimeout
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = defaultConnWriteTimeout
	}
}

// Client returns a new client of this server (ClientOption, then each mutate in order), closed at
// t.Cleanup; a client that cannot be made fails the test.
func (s *Server) Client(t testing.TB, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	return newTestClient(t, s.ClientOption(), mutate)
}

func newTestClient(t testing.TB, opt rueidis.ClientOption, mutate []func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	for _, m := range mutate {
		if m != nil {
			m(&opt)
		}
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("testkit: new client for %v: %v", opt.InitAddress, err)
	}
	t.Cleanup(c.Close)
	return c
}

func (s *Server) adminClient() (rueidis.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("testkit: server is closed")
	}
	if s.admin != nil {
		return s.admin, nil
	}
	opt := s.ClientOption()
	opt.DisableCache = true
	opt.ClientName = "coordkit-testkit-admin"
	// No background PING (rueidis pings a connection idle for Dialer.KeepAlive): it would show in
	// every test's INFO commandstats (CommandCounter).
	opt.Dialer.KeepAlive = -1
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	s.admin = c
	return c, nil
}

// resetAdmin drops the admin client (after Kill or Restart), so that the next Do dials afresh
// instead of meeting a connection to the old process.
func (s *Server) resetAdmin() {
	s.mu.Lock()
	admin := s.admin
	s.admin = nil
	s.mu.Unlock()
	if admin != nil {
		admin.Close()
	}
}

// Do runs one command (for example Do(ctx, "CONFIG", "SET", "maxmemory", "10mb")) on an internal
// admin client (made on first use, no client-side caching, closed by Close) and returns the reply;
// a server error reply is returned as the error (a *rueidis.RedisError).
func (s *Server) Do(ctx context.Context, args ...string) (rueidis.RedisMessage, error) {
	if len(args) == 0 || args[0] == "" {
		return rueidis.RedisMessage{}, errors.New("testkit: Do needs a command")
	}
	if strings.HasSuffix(strings.ToUpper(args[0]), "SUBSCRIBE") {
		return rueidis.RedisMessage{}, errors.New("testkit: Do cannot subscribe; use a client")
	}
	c, err := s.adminClient()
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	return c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
}

// CommandStats is CommandStats on the admin client.
func (s *Server) CommandStats(ctx context.Context) (map[string]int64, error) {
	c, err := s.adminClient()
	if err != nil {
		return nil, err
	}
	return CommandStats(ctx, c)
}

// Pause stops the server process (SIGSTOP): it keeps its connections but answers nothing until
// Resume. Process backend only.
func (s *Server) Pause() error { return s.inst.pause() }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.inst.resume() }

// Kill ends the server process with SIGKILL and waits for it to exit; the port then refuses
// connections. Killing a server that is not running does nothing.
func (s *Server) Kill() error {
	s.resetAdmin()
	return s.inst.kill()
}

// Restart kills the server if it runs and starts it again on the same port with an empty dataset
// and an empty script cache (there is no persistence), then waits until it answers PING. A
// cluster node keeps its node identity and slots (nodes.conf) but not its data.
func (s *Server) Restart(ctx context.Context) error {
	s.resetAdmin()
	return s.inst.restart(ctx)
}

// PID returns the server's process id, or 0 when it is not running or not a local process.
func (s *Server) PID() int { return s.inst.pid() }

// Fault helpers for tests, which fail the test on error.

// MustPause is Pause that fails the test on error (for example on the external backend).
func (s *Server) MustPause(t testing.TB) {
	t.Helper()
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
}

// MustResume is Resume that fails the test on error.
func (s *Server) MustResume(t testing.TB) {
	t.Helper()
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
}

// MustKill is Kill that fails the test on error.
func (s *Server) MustKill(t testing.TB) {
	t.Helper()
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
}

// MustRestart is Restart that fails the test on error.
func (s *Server) MustRestart(t testing.TB) {
	t.Helper()
	if err := s.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
}
