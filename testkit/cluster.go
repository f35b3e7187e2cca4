package testkit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// clusterPrimaries is the number of primaries LaunchCluster starts.
const clusterPrimaries = 3

// Cluster is a Redis/Valkey Cluster: three primaries (process backend; plus their replicas with
// WithReplicas) or the nodes named by COORDKIT_REDIS_CLUSTER_URL (external backend).
type Cluster struct {
	Nodes   []*Server // node servers, primaries first (as started; failovers change roles); each works as a standalone Server (Do, Client, fault helpers)
	Addrs   []string  // node addresses, host:port
	Target  Target
	Flavor  Flavor
	Version string
	// Network is the private network of a container-backend cluster (nil on other backends): its
	// nodes talk over it, and Server.Disconnect(ctx, Network) partitions a node from all of them
	// (and from this test binary).
	Network *Network

	base      rueidis.ClientOption
	closeOnce sync.Once
	closeErr  error
}

// LaunchCluster provides a cluster for target. With the process backend it starts three
// primaries (--cluster-enabled yes, cluster-config-file in each node's temp dir,
// --cluster-node-timeout 2000 or WithNodeTimeout, --cluster-replica-validity-factor 0, an
// explicit free --cluster-port), assigns the 16384 slots evenly with CLUSTER ADDSLOTSRANGE, joins
// the nodes with CLUSTER MEET, attaches WithReplicas replicas with CLUSTER REPLICATE, and returns
// once every node reports cluster_state:ok and its CLUSTER SLOTS covers all 16384 slots (and
// every replica's link is up). The caller must Close it.
func LaunchCluster(ctx context.Context, target Target, opts ...Option) (*Cluster, error) {
	return launchClusterWith(ctx, resolveBackend(ctx, true, target), target, opts...)
}

func launchClusterWith(ctx context.Context, b backend, target Target, opts ...Option) (*Cluster, error) {
	cfg := newConfig(defaultClusterStartTimeout, opts)
	return b.launchCluster(ctx, target, cfg)
}

// StartCluster is LaunchCluster for tests: closed at t.Cleanup; skipped when unavailable (fails
// when CI=true), as Start.
func StartCluster(t testing.TB, target Target, opts ...Option) *Cluster {
	t.Helper()
	c, err := LaunchCluster(context.Background(), target, opts...)
	if err != nil {
		FailOrSkip(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("testkit: closing %s cluster: %v", target, err)
		}
	})
	return c
}

func (processBackend) launchCluster(ctx context.Context, target Target, cfg *config) (*Cluster, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	total := clusterPrimaries * (1 + cfg.replicas)
	c := &Cluster{Target: target, Nodes: make([]*Server, total)}
	procs := make([]*proc, total)
	errs := make([]error, total)
	var wg sync.WaitGroup
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := newProc(target, cfg, true)
			if err != nil {
				errs[i] = err
				return
			}
			procs[i] = p
			errs[i] = p.startFresh(ctx)
		}()
	}
	wg.Wait()
	for i, p := range procs {
		if p != nil {
			c.Nodes[i] = &Server{Addr: p.addr(), Target: target, Backend: BackendProcess, inst: p}
		}
	}
	fail := func(err error) (*Cluster, error) {
		_ = c.Close()
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		for _, e := range errs {
			if errors.Is(e, ErrUnavailable) {
				return fail(e) // the same reason for every node: report it once
			}
		}
		return fail(err)
	}
	for _, n := range c.Nodes {
		if err := n.fillInfo(ctx); err != nil {
			return fail(err)
		}
		c.Addrs = append(c.Addrs, n.Addr)
	}
	c.Flavor, c.Version = c.Nodes[0].Flavor, c.Nodes[0].Version
	meet := make([]clusterBus, total)
	for i, p := range procs {
		meet[i] = clusterBus{host: "127.0.0.1", port: p.port, busPort: p.busPort}
	}
	if err := c.form(ctx, cfg, meet); err != nil {
		return fail(err)
	}
	return c, nil
}

// clusterBus is the address a node is met at (CLUSTER MEET host port bus-port).
type clusterBus struct {
	host          string
	port, busPort int
}

// form makes a cluster of c.Nodes (started, INFO read): distinct config epochs, the slots split
// evenly over the first three, every node met from the first (at meet[i]), replicas attached, and
// waits until it is ready.
func (c *Cluster) form(ctx context.Context, cfg *config, meet []clusterBus) error {
	target := c.Target
	for i, n := range c.Nodes[:clusterPrimaries] {
		// Distinct config epochs from the start, as redis-cli --cluster create sets them: otherwise
		// the primaries begin with equal epochs that gossip resolves later, and a node whose epoch
		// rises during a slot migration can win back the slot it gave away (the new owner then drops
		// the migrated keys).
		if _, err := rawDo(ctx, n.Addr, 5*time.Second, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("testkit: cluster %s: CLUSTER SET-CONFIG-EPOCH on %s: %w", target, n.Addr, err)
		}
		lo := i * ClusterSlots / clusterPrimaries
		hi := (i+1)*ClusterSlots/clusterPrimaries - 1
		if _, err := rawDo(ctx, n.Addr, 5*time.Second, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("testkit: cluster %s: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", target, lo, hi, n.Addr, err)
		}
	}
	for i := 1; i < len(c.Nodes); i++ {
		m := meet[i]
		if _, err := rawDo(ctx, c.Nodes[0].Addr, 5*time.Second, "CLUSTER", "MEET", m.host, strconv.Itoa(m.port), strconv.Itoa(m.busPort)); err != nil {
			return fmt.Errorf("testkit: cluster %s: CLUSTER MEET %s from %s: %w", target, c.Nodes[i].Addr, c.Nodes[0].Addr, err)
		}
	}
	if cfg.replicas > 0 {
		if err := c.attachReplicas(ctx); err != nil {
			return fmt.Errorf("testkit: cluster %s: %w", target, err)
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return fmt.Errorf("testkit: cluster %s: %w", target, err)
	}
	return nil
}

// waitReady polls until every node reports cluster_state:ok, knows every node, and its CLUSTER
// SLOTS covers all slots.
func (c *Cluster) waitReady(ctx context.Context) error {
	var last error
	for {
		last = c.check(ctx)
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

func (c *Cluster) check(ctx context.Context) error {
	for _, n := range c.Nodes {
		reply, err := rawDo(ctx, n.Addr, 2*time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr, err)
		}
		s, _ := reply.(string)
		info := parseInfo(s)
		if info["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.Addr, info["cluster_state"])
		}
		if known := info["cluster_known_nodes"]; known != strconv.Itoa(len(c.Nodes)) {
			return fmt.Errorf("%s: cluster_known_nodes:%s", n.Addr, known)
		}
		reply, err = rawDo(ctx, n.Addr, 2*time.Second, "CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", n.Addr, err)
		}
		covered, err := slotsCovered(reply)
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", n.Addr, err)
		}
		if covered != ClusterSlots {
			return fmt.Errorf("%s: CLUSTER SLOTS covers %d of %d slots", n.Addr, covered, ClusterSlots)
		}
	}
	return nil
}

func slotsCovered(reply any) (int, error) {
	ranges, ok := reply.([]any)
	if !ok {
		return 0, fmt.Errorf("unexpected reply %T", reply)
	}
	var seen [ClusterSlots]bool
	n := 0
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return 0, errors.New("malformed range")
		}
		lo, ok1 := e[0].(int64)
		hi, ok2 := e[1].(int64)
		if !ok1 || !ok2 || lo < 0 || hi >= ClusterSlots || lo > hi {
			return 0, errors.New("malformed range bounds")
		}
		for s := lo; s <= hi; s++ {
			if !seen[s] {
				seen[s] = true
				n++
			}
		}
	}
	return n, nil
}

// ClientOption returns options for a cluster client: InitAddress Addrs and the same test
// defaults as Server.ClientOption (without ForceSingleClient).
func (c *Cluster) ClientOption() rueidis.ClientOption {
	opt := c.base
	opt.InitAddress = append([]string(nil), c.Addrs...)
	applyTestDefaults(&opt)
	return opt
}

// Client returns a new cluster client (ClientOption, then each mutate), closed at t.Cleanup.
func (c *Cluster) Client(t testing.TB, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	return newTestClient(t, c.ClientOption(), mutate)
}

// Close closes every node (in parallel). Idempotent.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		errs := make([]error, len(c.Nodes))
		var wg sync.WaitGroup
		for i, n := range c.Nodes {
			if n == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.Close()
			}()
		}
		wg.Wait()
		c.closeErr = errors.Join(errs...)
		if c.Network != nil {
			c.closeErr = errors.Join(c.closeErr, c.Network.Close())
		}
	})
	return c.closeErr
}

// String describes the cluster, e.g. "redis 7.0.15 cluster [127.0.0.1:1 127.0.0.1:2 ...]".
func (c *Cluster) String() string {
	return fmt.Sprintf("%s %s cluster [%s]", c.Flavor, c.Version, strings.Join(c.Addrs, " "))
}
