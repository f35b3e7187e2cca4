package matrix

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/testkit"
)

// MaxParallelTargets bounds how many targets of one suite run at once (2 cores shared, -race).
const MaxParallelTargets = 2

var targetSlots = make(chan struct{}, MaxParallelTargets)

// TakeSlot blocks until fewer than MaxParallelTargets targets of this test binary hold a slot, and
// gives the slot back when t ends (at its cleanup, after its subtests).
func TakeSlot(t testing.TB) {
	targetSlots <- struct{}{}
	t.Cleanup(func() { <-targetSlots })
}

// Env is one running target shared by the scenarios of a suite: its server processes and an assertion
// client. Suites embed it in their own env.
type Env struct {
	Name    string
	Srv     *testkit.Server  // nil on a cluster; on a Sentinel target the primary as started
	Cluster *testkit.Cluster // nil on standalone
	// Sentinel is the Sentinel group of a Sentinel target (nil otherwise); ClientOption and Raw
	// then reach the primary through the Sentinels, and follow a failover.
	Sentinel *testkit.Sentinel
	Nodes    []*testkit.Server // every server process (one on standalone)
	Raw      rueidis.Client    // assertion client: no client-side caching, never used by the code under test
}

// StartEnv starts mt's server (or cluster) for t, logs what runs, and makes the assertion client; all
// are stopped or closed at t's cleanup. A target that cannot start fails t (skips it outside CI).
func StartEnv(t testing.TB, mt Target) *Env {
	t.Helper()
	e := &Env{Name: mt.Name}
	switch {
	case mt.Sentinel:
		e.Sentinel = testkit.StartSentinel(t, mt.Server)
		e.Srv = e.Sentinel.Primary
		e.Nodes = []*testkit.Server{e.Srv} // the replica's statistics would count replicated writes twice
		t.Logf("target %s: %s", mt.Name, e.Sentinel)
	case mt.Cluster:
		e.Cluster = testkit.StartCluster(t, mt.Server)
		e.Nodes = e.Cluster.Nodes
		t.Logf("target %s: %s", mt.Name, e.Cluster)
	default:
		e.Srv = testkit.Start(t, mt.Server)
		e.Nodes = []*testkit.Server{e.Srv}
		t.Logf("target %s: %s %s at %s (%s backend)", mt.Name, e.Srv.Flavor, e.Srv.Version, e.Srv.Addr, e.Srv.Backend)
	}
	opt := e.ClientOption()
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("target %s: assertion client: %v", mt.Name, err)
	}
	t.Cleanup(c.Close)
	e.Raw = c
	return e
}

// IsSentinel reports whether the target is a Sentinel group.
func (e *Env) IsSentinel() bool { return e.Sentinel != nil }

// IsCluster reports whether the target is a cluster.
func (e *Env) IsCluster() bool { return e.Cluster != nil }

// ClientOption returns a client option for the target (testkit's defaults; client-side caching on).
func (e *Env) ClientOption() rueidis.ClientOption {
	if e.Sentinel != nil {
		return e.Sentinel.ClientOption()
	}
	if e.Cluster != nil {
		return e.Cluster.ClientOption()
	}
	return e.Srv.ClientOption()
}

// CommandStats sums INFO commandstats (calls per command) over every server process of the target.
// A failed read fails t.
func (e *Env) CommandStats(t testing.TB) map[string]int64 {
	t.Helper()
	sum := map[string]int64{}
	for _, n := range e.Nodes {
		st, err := n.CommandStats(Ctx(t))
		if err != nil {
			t.Fatalf("commandstats of %s: %v", n.Addr, err)
		}
		for k, v := range st {
			sum[k] += v
		}
	}
	return sum
}

// SentinelTraffic names the commands (lower case, as INFO commandstats names them) that a Sentinel
// group's own processes run on its primary: a replica acknowledges replication offsets (REPLCONF)
// every second and pings; each Sentinel subscribes to and publishes its hello message every 2 s and
// reads INFO every 10 s. Read only.
var SentinelTraffic = map[string]bool{"ping": true, "publish": true, "replconf": true, "subscribe": true, "info": true}

// BackgroundCommands returns the commands (lower case, as INFO commandstats names them) that run on the
// target's nodes without any client of a test: INFO and PING on every target (INFO from the assertion
// client's CommandStats, PING from rueidis' idle-connection probes) and SentinelTraffic on a Sentinel
// target. A test that asserts a quiet server leaves these out. The map is new on each call.
func (e *Env) BackgroundCommands() map[string]bool {
	bg := map[string]bool{"info": true, "ping": true}
	if e.Sentinel != nil {
		for k := range SentinelTraffic {
			bg[k] = true
		}
	}
	return bg
}

// Ctx returns a context for one scenario's I/O: it ends after 60s or when t ends.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// WaitServing waits until c answers PING again (after a server restart or pause; rueidis replaces a
// broken connection on the next command, and the first command after the old one broke may fail). It
// polls every 20ms, each PING bounded by 1s, and fails t after 10s.
func WaitServing(t testing.TB, c rueidis.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Do(cctx, c.B().Ping().Build()).Error()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not serving again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
