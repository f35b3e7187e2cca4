package matrix

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/testkit"
)

// MaxParallelTargets bounds how many targets of one suite run at once (2 cores shared, -race), unless
// the suite calls SetParallelTargets.
const MaxParallelTargets = 2

var targetSlots = make(chan struct{}, MaxParallelTargets)

// SetParallelTargets sets how many targets of this test binary run at once (default
// MaxParallelTargets, at least 1). A suite whose scenarios mostly wait on TTLs and sleeps rather than
// use the CPU calls it from TestMain, before any test runs; it is not safe to call while tests run.
func SetParallelTargets(n int) {
	targetSlots = make(chan struct{}, max(n, 1))
}

// TakeSlot blocks until fewer than the parallel-target bound (MaxParallelTargets, or
// SetParallelTargets) of this test binary's targets hold a slot, and gives the slot back when t ends
// (at its cleanup, after its subtests).
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

// BlockedIn reports whether CLIENT LIST on any server process of the target shows a client blocked
// (flag b) in command cmd (lower case, as CLIENT LIST names it, e.g. "blpop"). A failed read fails t.
// Poll it to know that a blocking command was sent and has blocked, not only that it was issued.
func (e *Env) BlockedIn(t testing.TB, cmd string) bool {
	t.Helper()
	for _, n := range e.Nodes {
		m, err := n.Do(Ctx(t), "CLIENT", "LIST")
		if err != nil {
			t.Fatalf("client list of %s: %v", n.Addr, err)
		}
		list, err := m.ToString()
		if err != nil {
			t.Fatalf("client list of %s: %v", n.Addr, err)
		}
		if blockedIn(list, cmd) {
			return true
		}
	}
	return false
}

// blockedIn reports whether a CLIENT LIST reply shows a client blocked (flag b) in command cmd.
func blockedIn(list, cmd string) bool {
	for _, line := range strings.Split(list, "\n") {
		var blocked, in bool
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "flags="); ok {
				blocked = strings.Contains(v, "b")
			}
			in = in || f == "cmd="+cmd
		}
		if blocked && in {
			return true
		}
	}
	return false
}

// CommandStats sums INFO commandstats (calls per command) over every server process of the target.
// A failed read fails t. Counting what code under test sent is CommandsSince's job: a raw reading
// also holds the target's background commands (see BackgroundCommands).
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

// CommandsSince returns, per command, the calls the target's servers ran since before (a
// CommandStats reading of this target), leaving out BackgroundCommands: what is left is what the
// clients of the test sent, and the commands their scripts called. Commands with no new calls are
// absent; a count that went down (a server restarted in between) is negative, so that an assertion
// across a restart fails instead of passing on a reset counter.
func (e *Env) CommandsSince(t testing.TB, before map[string]int64) map[string]int64 {
	t.Helper()
	return e.CommandsBetween(before, e.CommandStats(t))
}

// CommandsBetween is CommandsSince between two readings of INFO commandstats, for a suite that sums
// its own set of this target's kind of servers (ownership's redlock quorum).
func (e *Env) CommandsBetween(before, after map[string]int64) map[string]int64 {
	bg := e.BackgroundCommands()
	out := map[string]int64{}
	for _, m := range []map[string]int64{after, before} {
		for k := range m {
			if d := after[k] - before[k]; d != 0 && !bg[k] {
				out[k] = d
			}
		}
	}
	return out
}

// WaitQuiet waits until the target's servers have run nothing but their background commands for
// quiet (INFO commandstats read every 10 ms), and returns the last reading: CommandsSince from it
// counts what runs next. A waiter that armed tracking is asleep once its traffic stopped, however
// late its last command came. Traffic that never pauses for quiet within limit fails t (a client
// polls).
func (e *Env) WaitQuiet(t testing.TB, quiet, limit time.Duration) map[string]int64 {
	t.Helper()
	end := time.Now().Add(limit)
	last := e.CommandStats(t)
	lastChange := time.Now()
	for {
		time.Sleep(10 * time.Millisecond)
		cur := e.CommandStats(t)
		if d := e.CommandsBetween(last, cur); len(d) > 0 {
			if time.Now().After(end) {
				t.Fatalf("the servers never went quiet for %v within %v; last commands: %v", quiet, limit, d)
			}
			lastChange = time.Now()
		} else if time.Since(lastChange) >= quiet {
			return cur
		}
		last = cur
	}
}

// Total returns the sum of the counts of d (a CommandsSince delta): the calls of every command in it.
func Total(d map[string]int64) int64 {
	var n int64
	for _, v := range d {
		n += v
	}
	return n
}

// Commands that a target's nodes may run at any moment without any operation of a test (lower case,
// as INFO commandstats names them). The cluster bus (gossip, failure reports) is not a command and
// never shows in INFO commandstats.
var (
	// connectionUpkeep runs on every target: INFO (the readings themselves; a Sentinel's every 10 s),
	// PING (rueidis probes a connection idle for 1 s; a Sentinel pings every second), the handshake
	// of a connection, which a client dials lazily or again at any time, and topology reads (a new
	// rueidis client asks a standalone server too whether it is a Cluster; a cluster client refreshes
	// its slots; testkit's cluster checks).
	connectionUpkeep = []string{"info", "ping", "hello", "auth", "select", "readonly",
		"client|setinfo", "client|setname", "client|tracking", "client|no-evict", "client|no-touch", "client|capa",
		"cluster|slots", "cluster|shards", "cluster|nodes", "cluster|info", "cluster|myid"}
	// sentinelTraffic is what a Sentinel group's replica and Sentinels send its primary: REPLCONF ACK
	// every second, PSYNC on a replica's reconnect, each Sentinel's SUBSCRIBE and its hello PUBLISH on
	// __sentinel__:hello every 2 s; and the ROLE check of a rueidis Sentinel client's new primary.
	sentinelTraffic = []string{"replconf", "psync", "subscribe", "publish", "role"}
)

// BackgroundCommands returns the commands that CommandsSince leaves out on this target:
// connectionUpkeep everywhere, and sentinelTraffic on a Sentinel target.
// CLIENT CACHING (a tracked read), MULTI / EXEC, ASKING and every data command are always counted. A
// scenario that must count a background command (a PUBLISH that wakes a waiter) observes it another
// way there, for example with a subscriber on the channel. The map is new on each call.
func (e *Env) BackgroundCommands() map[string]bool {
	names := connectionUpkeep
	if e.Sentinel != nil {
		names = append(slices.Clip(names), sentinelTraffic...)
	}
	bg := make(map[string]bool, len(names))
	for _, n := range names {
		bg[n] = true
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
