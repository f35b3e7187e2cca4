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
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
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

// launchCluster starts the cluster's nodes as containers on a private network of their own
// (Cluster.Network), each at a fixed address (container IP, port 6379, bus port 16379), and forms
// the cluster as the process backend does. Clients reach the nodes at those addresses, which needs
// an engine on this machine (Linux: container addresses are routable from the host).
func (containerBackend) launchCluster(ctx context.Context, target Target, cfg *config) (*Cluster, error) {
	if !target.Known() {
		_, err := Binary(target)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	nw, err := LaunchNetwork(ctx)
	if err != nil {
		return nil, err
	}
	total := clusterPrimaries * (1 + cfg.replicas)
	c := &Cluster{Target: target, Nodes: make([]*Server, total), Network: nw}
	ncfg := *cfg
	ncfg.networks = append([]*Network{nw}, cfg.networks...)
	ncfg.args = append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf", // in /data, kept by Restart (the container's own filesystem)
		"--cluster-node-timeout", strconv.FormatInt(cfg.clusterNodeTimeout().Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0",
	}, cfg.args...)
	errs := make([]error, total)
	var wg sync.WaitGroup
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Nodes[i], errs[i] = containerBackend{}.launch(ctx, target, &ncfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		for _, e := range errs {
			if errors.Is(e, ErrUnavailable) {
				return nil, e
			}
		}
		return nil, err
	}
	meet := make([]clusterBus, total)
	for i, n := range c.Nodes {
		c.Addrs = append(c.Addrs, n.Addr)
		meet[i] = clusterBus{host: n.inst.(*ctr).ips[nw.Name].String(), port: 6379, busPort: 16379}
	}
	c.Flavor, c.Version = c.Nodes[0].Flavor, c.Nodes[0].Version
	if err := c.form(ctx, cfg, meet); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// down reports whether the container is stopped (Kill) or cut from network n (Disconnect).
func (c *ctr) down(n *Network) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped || (n != nil && c.cut[n.Name])
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
	if err == nil {
		sweepBeforeFirstContainer(ctx, cli)
	}
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	c := &ctr{target: target, cli: cli, local: localEngine(host), img: img, cfg: cfg, nets: cfg.networks}
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

	nets []*Network            // WithNetwork: joined instead of publishing a port
	ips  map[string]netip.Addr // fixed address per network name (set before the container starts)

	mu      sync.Mutex
	cut     map[string]bool // networks Disconnect took it off
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
	if len(c.nets) > 0 {
		return c.runOnNetworks(ctx)
	}
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
			testcontainers.WithLabels(testkitLabels(map[string]string{labelTestkit + ".target": string(c.target)})),
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

// runOnNetworks creates the container on its first network at a fixed address (no published
// port), joins the other networks at fixed addresses, and waits for PING at the first address.
func (c *ctr) runOnNetworks(ctx context.Context) error {
	c.ips = map[string]netip.Addr{}
	for _, n := range c.nets {
		ip, err := n.allocate()
		if err != nil {
			return err
		}
		c.ips[n.Name] = ip
	}
	first := c.nets[0]
	tc, err := tcredis.Run(ctx, c.img.ref,
		testcontainers.WithCmd(c.cmd()...),
		testcontainers.WithLabels(testkitLabels(map[string]string{labelTestkit + ".target": string(c.target)})),
		tcnetwork.WithNetworkName(nil, first.Name),
		testcontainers.WithEndpointSettingsModifier(func(m map[string]*network.EndpointSettings) {
			if e := m[first.Name]; e != nil {
				e.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: c.ips[first.Name]}
			}
		}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			hc.PublishAllPorts = false
			hc.PortBindings = nil
		}),
		testcontainers.WithWaitStrategyAndDeadline(c.cfg.startTimeout, wait.ForLog("Ready to accept connections")),
	)
	if err != nil {
		if tc != nil {
			_ = tc.Terminate(context.WithoutCancel(ctx))
		}
		return fmt.Errorf("testkit: %s container from %s on %s: %w", c.target, c.img.ref, first.Name, err)
	}
	c.tc, c.id = tc, tc.GetContainerID()
	for _, n := range c.nets[1:] {
		if _, err := c.cli.NetworkConnect(ctx, n.id, client.NetworkConnectOptions{
			Container:      c.id,
			EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: c.ips[n.Name]}},
		}); err != nil {
			return fmt.Errorf("testkit: %s container %.12s: joining %s: %w", c.target, c.id, n.Name, err)
		}
	}
	c.addr = net.JoinHostPort(c.ips[first.Name].String(), "6379")
	if err := c.waitPing(ctx); err != nil {
		return fmt.Errorf("%w (a container address must be reachable from here: a Linux engine on this machine)", err)
	}
	return nil
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
// answers until resume. Pausing a paused or killed container does nothing, as on the process backend.
func (c *ctr) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	if c.paused || c.stopped { // as SIGSTOP to a stopped process: nothing to do
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerOpTimeout)
	defer cancel()
	if _, err := c.cli.ContainerPause(ctx, c.id, client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("testkit: pausing %s container %.12s: %w", c.target, c.id, err)
	}
	c.paused = true
	return nil
}

// resume unfreezes a paused container (docker unpause); resuming a running one does nothing.
func (c *ctr) resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return err
	}
	if !c.paused { // as SIGCONT to a running process: nothing to do
		return nil
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
