package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// BackendContainer is Server.Backend for a server in a container (testcontainers-go).
const BackendContainer = "container"

// EnvDockerHost is the Docker engine endpoint (unix:///path, tcp://host:port), as for the docker CLI.
const EnvDockerHost = "DOCKER_HOST"

const (
	// engineProbeTimeout bounds the PING that decides whether an engine answers.
	engineProbeTimeout = 2 * time.Second
	// containerOpTimeout bounds one Docker API call of a fault helper (pause, stop, start).
	containerOpTimeout = 30 * time.Second
	// serverPort is the port the server listens on inside its container.
	serverPort = "6379/tcp"
	// labelTestkit marks testkit's containers (docker ps --filter label=org.coordkit.testkit).
	labelTestkit = "org.coordkit.testkit"
)

// dockerSocketCandidates are the sockets tried, in order, when DOCKER_HOST is not set: the
// system socket, then the usual rootless / Docker Desktop ones. A variable for tests.
var dockerSocketCandidates = func() []string {
	c := []string{"/var/run/docker.sock"}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		c = append(c, filepath.Join(d, "docker.sock"))
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		c = append(c, filepath.Join(home, ".docker", "run", "docker.sock"), filepath.Join(home, ".docker", "desktop", "docker.sock"))
	}
	return append(c, fmt.Sprintf("/run/user/%d/docker.sock", os.Getuid()))
}

// engineEndpoint returns the Docker endpoint to use: DOCKER_HOST when set, else the first socket
// of dockerSocketCandidates that exists ("" when none does); tried says what was looked at.
func engineEndpoint() (host string, tried []string) {
	if h := strings.TrimSpace(os.Getenv(EnvDockerHost)); h != "" {
		return h, []string{EnvDockerHost + "=" + h}
	}
	for _, s := range dockerSocketCandidates() {
		tried = append(tried, s)
		if fi, err := os.Stat(s); err == nil && fi.Mode().Type() == os.ModeSocket {
			return "unix://" + s, tried
		}
	}
	return "", tried
}

// connectEngine returns a client of the Docker engine once it has answered a PING within
// engineProbeTimeout (API version negotiated), or an error wrapping ErrUnavailable that names the
// endpoint(s) tried. It does not use testcontainers' own discovery, which caches its first result
// (even a failure) for the whole process and reads the testcontainers configuration once: testkit
// must be able to set TESTCONTAINERS_RYUK_DISABLED before that.
func connectEngine(ctx context.Context) (*client.Client, string, error) {
	host, tried := engineEndpoint()
	if host == "" {
		return nil, "", fmt.Errorf("testkit: container backend: no Docker engine: %s is not set and no socket at %s: %w",
			EnvDockerHost, strings.Join(tried, ", "), ErrUnavailable)
	}
	cli, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		return nil, "", fmt.Errorf("testkit: container backend: Docker endpoint %s (%s): %v: %w", host, strings.Join(tried, ", "), err, ErrUnavailable)
	}
	pctx, cancel := context.WithTimeout(ctx, engineProbeTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		_ = cli.Close()
		return nil, "", fmt.Errorf("testkit: container backend: no Docker engine answers at %s (from %s): %v: %w",
			host, strings.Join(tried, ", "), err, ErrUnavailable)
	}
	return cli, host, nil
}

// probeEngine reports whether a Docker engine answers (nil) or why not (wrapping ErrUnavailable).
// Without a socket it returns at once; otherwise within engineProbeTimeout.
func probeEngine(ctx context.Context) error {
	cli, _, err := connectEngine(ctx)
	if err != nil {
		return err
	}
	return cli.Close()
}

// localEngine reports whether the engine runs on this machine (a unix socket or a loopback TCP
// address), so that a container port published on 127.0.0.1 is reachable here.
func localEngine(host string) bool {
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix", "npipe":
		return true
	case "tcp", "http", "https":
		h := u.Hostname()
		if h == "localhost" {
			return true
		}
		ip, err := netip.ParseAddr(h)
		return err == nil && ip.IsLoopback()
	}
	return false
}

// containerBackend runs each server in a container from the target's image (targetTable), or
// from an image built locally from the cached binary when the registry cannot be reached.
type containerBackend struct{}

func (containerBackend) name() string { return BackendContainer }

func (containerBackend) launchCluster(_ context.Context, target Target, _ *config) (*Cluster, error) {
	if !target.Known() {
		_, err := Binary(target)
		return nil, err
	}
	return nil, fmt.Errorf("testkit: a cluster is not provided by the container backend (use %s=%s or %s): %w: %w",
		EnvBackend, BackendProcess, EnvRedisClusterURL, ErrUnsupported, ErrUnavailable)
}

func (containerBackend) launch(ctx context.Context, target Target, cfg *config) (*Server, error) {
	spec, ok := lookupTarget(target)
	if !ok {
		_, err := Binary(target) // the unknown-target error
		return nil, err
	}
	cli, host, err := connectEngine(ctx)
	if err != nil {
		return nil, err
	}
	img, err := ensureImage(ctx, cli, spec)
	if err == nil {
		err = prepareReaper(ctx, cli)
	}
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	c := &ctr{target: target, cli: cli, local: localEngine(host), img: img, cfg: cfg}
	if err := c.run(ctx); err != nil {
		_ = c.close()
		return nil, err
	}
	s := &Server{Addr: c.addr, Target: target, Backend: BackendContainer, inst: c}
	ictx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if err := s.fillInfo(ictx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// ctr is one server container; its faults go through the Docker API.
type ctr struct {
	target Target
	cli    *client.Client
	local  bool // engine on this machine: publish on a chosen 127.0.0.1 port
	img    image
	cfg    *config

	mu      sync.Mutex
	tc      *tcredis.RedisContainer
	id      string
	addr    string
	stopped bool // Kill stopped it
	paused  bool
	closed  bool
}

// cmd is the container command: the server's arguments (for a registry image, behind the server
// name, which its docker-entrypoint.sh runs as the unprivileged user).
func (c *ctr) cmd() []string {
	a := []string{
		"--bind", "0.0.0.0",
		"--protected-mode", "no",
		"--port", "6379",
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "yes",
	}
	a = append(a, c.cfg.args...)
	if !c.img.local {
		a = append([]string{string(c.target.Flavor()) + "-server"}, a...)
	}
	return a
}

// run creates and starts the container. On a local engine the port is published on 127.0.0.1 at
// a port testkit picks (so that Restart keeps it), retrying with another port (up to 3 attempts)
// when the engine reports it taken; on a remote engine the engine picks the port.
func (c *ctr) run(ctx context.Context) error {
	var lastErr error
	for attempt := 1; attempt <= maxStartAttempts; attempt++ {
		binding := network.PortBinding{HostPort: "0"}
		if c.local {
			port, err := freePort()
			if err != nil {
				return err
			}
			binding = network.PortBinding{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(port)}
		}
		tc, err := tcredis.Run(ctx, c.img.ref,
			testcontainers.WithCmd(c.cmd()...),
			testcontainers.WithLabels(map[string]string{labelTestkit: "1", labelTestkit + ".target": string(c.target)}),
			testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
				hc.PortBindings = network.PortMap{network.MustParsePort(serverPort): {binding}}
			}),
			// Not the module's wait.ForListeningPort: it execs a shell, which a scratch image lacks.
			testcontainers.WithWaitStrategyAndDeadline(c.cfg.startTimeout, wait.ForLog("Ready to accept connections")),
		)
		if err == nil {
			c.tc, c.id = tc, tc.GetContainerID()
			if c.addr, err = c.endpoint(ctx, binding); err == nil {
				return c.waitPing(ctx)
			}
			return fmt.Errorf("testkit: %s container %.12s: %w", c.target, c.id, err)
		}
		if tc != nil {
			_ = tc.Terminate(context.WithoutCancel(ctx))
		}
		lastErr = fmt.Errorf("testkit: %s container from %s: %w", c.target, c.img.ref, err)
		msg := err.Error()
		if !c.local || ctx.Err() != nil || !(strings.Contains(msg, "already allocated") || strings.Contains(msg, "address already in use")) {
			break
		}
	}
	return lastErr
}

func (c *ctr) endpoint(ctx context.Context, b network.PortBinding) (string, error) {
	if c.local {
		return net.JoinHostPort("127.0.0.1", b.HostPort), nil
	}
	host, err := c.tc.Host(ctx)
	if err != nil {
		return "", err
	}
	p, err := c.tc.MappedPort(ctx, serverPort)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(int(p.Num()))), nil
}

// waitPing waits until the server answers PING on c.addr (a published port may accept
// connections before the server listens: the engine's proxy).
func (c *ctr) waitPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.startTimeout)
	defer cancel()
	var last error
	for {
		reply, err := rawDo(ctx, c.addr, time.Second, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: %s container %.12s at %s not ready after %v: %v (last probe: %v)", c.target, c.id, c.addr, c.cfg.startTimeout, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *ctr) usable() error {
	if c.closed {
		return errors.New("testkit: server is closed")
	}
	return nil
}

func (c *ctr) pid() int { return 0 } // not a process of this machine's test binary

// pause freezes the container (docker pause: cgroup freezer): connections stay open, nothing
// answers until resume.
func (c *ctr) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
	defer cancel()
	if _, err := c.cli.ContainerPause(ctx, c.id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("testkit: pausing %s container %.12s: %w", c.target, c.id, err)
	}
	c.paused = true
	return nil
}

// resume unfreezes a paused container (docker unpause).
func (c *ctr) resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
	defer cancel()
	if _, err := c.cli.ContainerUnpause(ctx, c.id, client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("testkit: resuming %s container %.12s: %w", c.target, c.id, err)
	}
	c.paused = false
	return nil
}

// stopLocked stops the container at once (docker stop -t 0: SIGKILL), unpausing it first, and
// returns when it has stopped.
func (c *ctr) stopLocked(ctx context.Context) error {
	if c.stopped {
		return nil
	}
	if c.paused {
		_, _ = c.cli.ContainerUnpause(ctx, c.id, client.ContainerUnpauseOptions{})
		c.paused = false
	}
	zero := 0
	if _, err := c.cli.ContainerStop(ctx, c.id, client.ContainerStopOptions{Timeout: &zero}); err != nil {
		return fmt.Errorf("testkit: stopping %s container %.12s: %w", c.target, c.id, err)
	}
	c.stopped = true
	return nil
}

// kill stops the container at once; its published port then refuses connections. Restart starts
// it again.
func (c *ctr) kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
	defer cancel()
	return c.stopLocked(ctx)
}

// restart stops the container if it runs and starts it again (docker start): same container, same
// published port on a local engine, a fresh server process with no data and no scripts (nothing
// is persisted). On a remote engine the engine may publish another port, so Restart is
// unsupported there.
func (c *ctr) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	if !c.local {
		return fmt.Errorf("testkit: Restart is not supported on container backend with a remote engine (the published port may change): %w", ErrUnsupported)
	}
	octx, cancel := context.WithTimeout(ctx, containerOpTimeout)
	defer cancel()
	if err := c.stopLocked(octx); err != nil {
		return err
	}
	if _, err := c.cli.ContainerStart(octx, c.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("testkit: restart: starting %s container %.12s: %w", c.target, c.id, err)
	}
	c.stopped = false
	if err := c.waitPing(ctx); err != nil {
		return fmt.Errorf("testkit: restart: %w", err)
	}
	return nil
}

// close removes the container (and its anonymous volumes) and closes the engine client.
func (c *ctr) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.tc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
		defer cancel()
		if terr := testcontainers.TerminateContainer(c.tc, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); terr != nil {
			err = fmt.Errorf("testkit: removing %s container %.12s: %w", c.target, c.id, terr)
		}
	}
	return errors.Join(err, c.cli.Close())
}

// testcontainersConfigRyukDisabled reports testcontainers' (process-wide, read-once) reaper setting.
func testcontainersConfigRyukDisabled() bool { return testcontainers.ReadConfig().RyukDisabled }
