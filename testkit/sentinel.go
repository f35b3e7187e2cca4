package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// SentinelMaster is the name under which a Sentinel group monitors its primary.
const SentinelMaster = "coordkit"

// sentinelCount is how many Sentinels LaunchSentinel starts; sentinelQuorum of them must agree
// that the primary is down before one of them fails it over.
const (
	sentinelCount  = 3
	sentinelQuorum = 2
	// sentinelDownAfter is down-after-milliseconds: how long the primary must not answer before a
	// Sentinel deems it down.
	sentinelDownAfter = time.Second
)

// Sentinel is a primary, its replica and three Sentinels monitoring them as SentinelMaster
// (process backend). Clients built from ClientOption ask the Sentinels where the primary is
// (rueidis.ClientOption.Sentinel) and follow a failover.
//
// The replica replicates through an in-process proxy (as Replicated does), so HoldReplication can
// hold the stream back: writes made then are lost by a failover, deterministically.
type Sentinel struct {
	Primary   *Server   // the primary as started (after a failover, a replica of the new one)
	Replica   *Server   // the replica as started (after a failover, the primary)
	Sentinels []*Server // the three Sentinel processes (Pause / Kill / Restart work on them)
	Target    Target
	Flavor    Flavor
	Version   string

	repl      *Replicated
	closeOnce sync.Once
	closeErr  error
}

// LaunchSentinel starts a primary and a replica (LaunchReplicated) and three Sentinels
// (`<flavor>-server sentinel.conf --sentinel`, quorum 2, down-after-milliseconds 1000,
// failover-timeout 5000), and returns once every Sentinel knows the replica and the two other
// Sentinels. Process backend only (other backends: an error wrapping ErrUnsupported). The caller must
// Close it.
func LaunchSentinel(ctx context.Context, target Target, opts ...Option) (*Sentinel, error) {
	r, err := LaunchReplicated(ctx, target, opts...)
	if err != nil {
		return nil, err
	}
	g := &Sentinel{Primary: r.Primary, Replica: r.Replica, Target: target, Flavor: r.Primary.Flavor, Version: r.Primary.Version, repl: r}
	cfg := newConfig(defaultClusterStartTimeout, opts)
	cfg.args = nil // server arguments are not Sentinel arguments
	_, pport, _ := net.SplitHostPort(r.Primary.Addr)
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s %[3]d\nsentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s 5000\nsentinel parallel-syncs %[1]s 1\n",
		SentinelMaster, pport, sentinelQuorum, sentinelDownAfter.Milliseconds())
	errs := make([]error, sentinelCount)
	g.Sentinels = make([]*Server, sentinelCount)
	var wg sync.WaitGroup
	for i := range sentinelCount {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := newProc(target, cfg, false)
			if err != nil {
				errs[i] = err
				return
			}
			p.sentinelConf = conf
			g.Sentinels[i] = &Server{Target: target, Backend: BackendProcess, inst: p}
			if errs[i] = p.startFresh(ctx); errs[i] == nil {
				g.Sentinels[i].Addr = p.addr()
				g.Sentinels[i].Flavor, g.Sentinels[i].Version = g.Flavor, g.Version
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = g.Close()
		return nil, fmt.Errorf("testkit: sentinel: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if err := g.waitDiscovered(wctx); err != nil {
		_ = g.Close()
		return nil, fmt.Errorf("testkit: sentinel: %w", err)
	}
	return g, nil
}

// StartSentinel is LaunchSentinel for tests: closed at t.Cleanup; skipped when the backend cannot
// run Sentinels (ErrUnsupported) or the server is unavailable (that fails when CI=true), as
// StartReplicated.
func StartSentinel(t testing.TB, target Target, opts ...Option) *Sentinel {
	t.Helper()
	g, err := LaunchSentinel(context.Background(), target, opts...)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("%v", err)
		}
		FailOrSkip(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("testkit: closing %s sentinel group: %v", target, err)
		}
	})
	return g
}

// sentinelMaster returns SENTINEL MASTER's fields as a Sentinel at addr sees the primary.
func sentinelMaster(ctx context.Context, addr string) (map[string]string, error) {
	reply, err := rawDo(ctx, addr, 2*time.Second, "SENTINEL", "MASTER", SentinelMaster)
	if err != nil {
		return nil, fmt.Errorf("SENTINEL MASTER on %s: %w", addr, err)
	}
	a, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("SENTINEL MASTER on %s: unexpected reply %T", addr, reply)
	}
	m := map[string]string{}
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		v, _ := a[i+1].(string)
		m[k] = v
	}
	return m, nil
}

func (g *Sentinel) waitDiscovered(ctx context.Context) error {
	var last error
	for {
		last = nil
		for _, s := range g.running() {
			m, err := sentinelMaster(ctx, s.Addr)
			if err != nil {
				last = err
				break
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
				last = fmt.Errorf("%s knows %s replica(s) and %s other sentinel(s)", s.Addr, m["num-slaves"], m["num-other-sentinels"])
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (g *Sentinel) running() []*Server {
	var out []*Server
	for _, s := range g.Sentinels {
		if s != nil && s.PID() != 0 {
			out = append(out, s)
		}
	}
	return out
}

// Addrs returns the Sentinels' addresses.
func (g *Sentinel) Addrs() []string {
	a := make([]string, 0, len(g.Sentinels))
	for _, s := range g.Sentinels {
		a = append(a, s.Addr)
	}
	return a
}

// ClientOption returns options for a client of the primary found through the Sentinels:
// InitAddress the Sentinels, Sentinel.MasterSet SentinelMaster, and the same test defaults as
// Server.ClientOption.
func (g *Sentinel) ClientOption() rueidis.ClientOption {
	opt := rueidis.ClientOption{InitAddress: g.Addrs(), Sentinel: rueidis.SentinelOption{MasterSet: SentinelMaster}}
	applyTestDefaults(&opt)
	return opt
}

// Client returns a new Sentinel client (ClientOption, then each mutate), closed at t.Cleanup.
func (g *Sentinel) Client(t testing.TB, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	return newTestClient(t, g.ClientOption(), mutate)
}

// CurrentPrimary returns the server the Sentinels name as the primary (SENTINEL
// GET-MASTER-ADDR-BY-NAME, asked of the first running Sentinel that answers).
func (g *Sentinel) CurrentPrimary(ctx context.Context) (*Server, error) {
	var errs []error
	for _, s := range g.running() {
		reply, err := rawDo(ctx, s.Addr, 2*time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a, _ := reply.([]any)
		if len(a) != 2 {
			return nil, fmt.Errorf("testkit: SENTINEL GET-MASTER-ADDR-BY-NAME on %s: unexpected reply %v", s.Addr, reply)
		}
		h, _ := a[0].(string)
		p, _ := a[1].(string)
		addr := net.JoinHostPort(h, p)
		for _, n := range []*Server{g.Primary, g.Replica} {
			if n.Addr == addr {
				return n, nil
			}
		}
		return nil, fmt.Errorf("testkit: the sentinels name %s, not a server of this group", addr)
	}
	return nil, fmt.Errorf("testkit: no sentinel answers: %w", errors.Join(errs...))
}

// WaitSync waits until the replica has received everything the primary wrote (Replicated.WaitSync;
// before a failover only).
func (g *Sentinel) WaitSync(ctx context.Context) error { return g.repl.WaitSync(ctx) }

// HoldReplication drops the replication stream from now on (Replicated.HoldReplication): what the
// primary writes next never reaches the replica, and a failover loses it.
func (g *Sentinel) HoldReplication() error { return g.repl.HoldReplication() }

// ReleaseReplication ends HoldReplication.
func (g *Sentinel) ReleaseReplication() error { return g.repl.ReleaseReplication() }

// Failover makes the Sentinels fail the primary over to the replica (SENTINEL FAILOVER, which
// needs no agreement) and waits until every running Sentinel names the new primary and it reports
// role:master. It does not wait for the replica to catch up first: writes it had not received
// (HoldReplication) are lost, and the old primary, turned into a replica of the new one, drops them
// at its resync. That conversion comes seconds after Failover returns: until then the old primary
// still accepts writes, and a Sentinel client still reaches it until the Sentinels' switch message
// moves the client, so a test confirms a write on the new primary before it counts. It returns the
// new primary.
func (g *Sentinel) Failover(ctx context.Context) (*Server, error) {
	old, err := g.CurrentPrimary(ctx)
	if err != nil {
		return nil, err
	}
	s := g.running()
	if len(s) == 0 {
		return nil, errors.New("testkit: no sentinel runs")
	}
	if _, err := rawDo(ctx, s[0].Addr, 2*time.Second, "SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		return nil, fmt.Errorf("testkit: SENTINEL FAILOVER on %s: %w", s[0].Addr, err)
	}
	return g.WaitFailover(ctx, old)
}

// WaitFailover waits until every running Sentinel names a primary other than old and that server
// reports role:master (after Failover, or after old was killed, paused or partitioned: expect
// down-after-milliseconds (1s) plus an election, a few seconds). It polls every 50ms and returns
// ctx's error with the last reason when ctx ends first.
func (g *Sentinel) WaitFailover(ctx context.Context, old *Server) (*Server, error) {
	var last error
	for {
		var cur *Server
		last = nil
		for _, s := range g.running() {
			reply, err := rawDo(ctx, s.Addr, 2*time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			a, _ := reply.([]any)
			if err != nil || len(a) != 2 {
				last = fmt.Errorf("%s: %v %v", s.Addr, reply, err)
				break
			}
			h, _ := a[0].(string)
			p, _ := a[1].(string)
			addr := net.JoinHostPort(h, p)
			if addr == old.Addr {
				last = fmt.Errorf("%s still names %s", s.Addr, addr)
				break
			}
			for _, n := range []*Server{g.Primary, g.Replica} {
				if n.Addr == addr {
					cur = n
				}
			}
		}
		if last == nil && cur != nil {
			reply, err := rawDo(ctx, cur.Addr, 2*time.Second, "ROLE")
			if a, _ := reply.([]any); err == nil && len(a) > 0 && a[0] == "master" {
				return cur, nil
			}
			last = fmt.Errorf("%s: ROLE %v %v", cur.Addr, reply, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testkit: sentinel failover not done: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// String describes the group, e.g. "redis 8.0.6 sentinel [primary 127.0.0.1:1, replica ..., sentinels ...]".
func (g *Sentinel) String() string {
	return fmt.Sprintf("%s %s sentinel [primary %s, replica %s, sentinels %s]", g.Flavor, g.Version, g.Primary.Addr, g.Replica.Addr, strings.Join(g.Addrs(), " "))
}

// Close stops the Sentinels, then the servers. Idempotent.
func (g *Sentinel) Close() error {
	g.closeOnce.Do(func() {
		var errs []error
		for _, s := range g.Sentinels {
			if s != nil {
				errs = append(errs, s.Close())
			}
		}
		errs = append(errs, g.repl.Close())
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}
