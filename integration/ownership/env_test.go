package ownership_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// quorumNodes is the number of independent servers a redlock group spans on a standalone target.
const quorumNodes = 3

// env is one running target shared by its scenarios, which run one after another (every kind of one
// scenario too), each on its own keys, so server-wide counters (INFO commandstats) taken inside a
// scenario see only that scenario's traffic.
type env struct {
	*matrix.Env
	target matrix.Target
	// quorum holds, on a standalone target, the servers of a redlock group: the matrix server first,
	// then quorumNodes-1 more of the same target; nil on a cluster (redlock rejects cluster clients).
	quorum []*testkit.Server
	// quorumRaw are assertion clients of quorum's servers (no client-side caching), in the same order.
	quorumRaw []rueidis.Client
}

func startEnv(t *testing.T, mt matrix.Target) *env {
	t.Helper()
	e := &env{Env: matrix.StartEnv(t, mt), target: mt}
	if e.IsCluster() {
		return e
	}
	e.quorum = []*testkit.Server{e.Srv}
	e.quorumRaw = []rueidis.Client{e.Raw}
	for range quorumNodes - 1 {
		s := testkit.Start(t, mt.Server)
		e.quorum = append(e.quorum, s)
		e.quorumRaw = append(e.quorumRaw, s.Client(t, matrix.NoCache))
	}
	return e
}

// servers returns every server process of the target: the matrix's nodes and the extra quorum
// servers.
func (e *env) servers() []*testkit.Server {
	out := append([]*testkit.Server(nil), e.Nodes...)
	if len(e.quorum) > 1 {
		out = append(out, e.quorum[1:]...)
	}
	return out
}

// place returns the servers that hold k's hold of res: the standalone server (the quorum's servers
// for redlock), or on a cluster the primary serving res's slot.
func (e *env) place(t *testing.T, k *kind, res string) []*testkit.Server {
	t.Helper()
	if k.quorum {
		return e.quorum
	}
	if !e.IsCluster() {
		return []*testkit.Server{e.Srv}
	}
	s, err := e.Cluster.PrimaryOf(ctx(t), testkit.KeySlot(k.slotKey(res)))
	require.NoError(t, err)
	return []*testkit.Server{s}
}

// raws returns the assertion clients that see k's hold: the quorum's for redlock, else the env's.
func (e *env) raws(k *kind) []rueidis.Client {
	if k.quorum {
		return e.quorumRaw
	}
	return []rueidis.Client{e.Raw}
}

// How a scenario's clients are made.
type clientMode int

const (
	// plain: testkit's client option for the target (client-side caching on, rueidis' default
	// PipelineMultiplex: 2 connections per server on 2 CPUs, dialled lazily).
	plain clientMode = iota
	// tracked: luakit.NewTrackedClient with a new Tracker, which the module finds through
	// luakit.TrackerOf (no tracker option is passed to the module).
	tracked
)

// clients returns the clients one factory of k needs (one, or one per quorum server for redlock),
// closed at t.Cleanup.
func (e *env) clients(t *testing.T, k *kind, mode clientMode, mutate ...func(*rueidis.ClientOption)) []rueidis.Client {
	t.Helper()
	var opts []rueidis.ClientOption
	if k.quorum {
		for _, s := range e.quorum {
			opts = append(opts, s.ClientOption())
		}
	} else {
		opts = append(opts, e.ClientOption())
	}
	var out []rueidis.Client
	for _, opt := range opts {
		for _, m := range mutate {
			m(&opt)
		}
		var (
			c   rueidis.Client
			err error
		)
		if mode == tracked {
			c, err = luakit.NewTrackedClient(opt, luakit.NewTracker())
		} else {
			c, err = rueidis.NewClient(opt)
		}
		require.NoError(t, err)
		t.Cleanup(c.Close)
		out = append(out, c)
	}
	return out
}

// proxied returns one proxy per server of place(k, res) and a client through each (testkit's proxy
// client: one connection, single-node; on a cluster it talks to res's primary directly, which serves
// every key of res's slot). Proxies and clients are closed at t.Cleanup.
func (e *env) proxied(t *testing.T, k *kind, res string) (proxies, []rueidis.Client) {
	t.Helper()
	var ps proxies
	var cs []rueidis.Client
	for _, s := range e.place(t, k, res) {
		p := testkit.NewProxy(t, s.Addr)
		ps = append(ps, p)
		cs = append(cs, p.Client(t))
	}
	return ps, cs
}

// proxies are the proxies in front of one hold's servers; a fault applies to all of them.
type proxies []*testkit.Proxy

// delay delays every reply by d.
func (ps proxies) delay(t *testing.T, d time.Duration) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, p.AddLatency(d))
	}
}

// reset removes every fault.
func (ps proxies) reset(t *testing.T) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, p.Reset())
	}
}

// holders returns on how many of the servers of place(k, res) the hold of res exists, and how many
// servers there are.
func (e *env) holders(t *testing.T, k *kind, res string) (n, of int) {
	t.Helper()
	for _, c := range e.raws(k) {
		ok, err := k.holds(ctx(t), c, res)
		require.NoError(t, err)
		if ok {
			n++
		}
	}
	return n, len(e.raws(k))
}

// requireHeld asserts that res is held on every server of its place.
func (e *env) requireHeld(t *testing.T, k *kind, res, msg string) {
	t.Helper()
	n, of := e.holders(t, k, res)
	require.Equal(t, of, n, "%s: the hold must exist on the server (%d of %d servers hold it)", msg, n, of)
}

// requireGone asserts that no server holds res.
func (e *env) requireGone(t *testing.T, k *kind, res, msg string) {
	t.Helper()
	n, of := e.holders(t, k, res)
	require.Zero(t, n, "%s: the hold must be gone from the server (%d of %d servers hold it)", msg, n, of)
}

// eventuallyGone waits up to within for res to be gone from every server.
func (e *env) eventuallyGone(t *testing.T, k *kind, res string, within time.Duration, msg string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, of := e.holders(t, k, res)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the hold is still on %d of %d servers after %v", msg, n, of, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// removeHold deletes res's hold on every server, as an operator or a data loss would.
func (e *env) removeHold(t *testing.T, k *kind, res string) {
	t.Helper()
	for _, c := range e.raws(k) {
		require.NoError(t, k.remove(ctx(t), c, res))
	}
}

// commands returns INFO commandstats summed over every server of the target and the quorum (count
// what ran between two readings with e.CommandsBetween).
func (e *env) commands(t *testing.T) map[string]int64 {
	t.Helper()
	sum := map[string]int64{}
	for _, s := range e.servers() {
		st, err := s.CommandStats(ctx(t))
		require.NoError(t, err)
		for k, v := range st {
			sum[k] += v
		}
	}
	return sum
}

// scripts returns how many scripts (EVALSHA, EVAL, FCALL) the servers ran between two snapshots, and
// the conditional deletes (DELIFEQ, DELEX) that stand for a release script where the server has them
// (lock's Release on Valkey 9). A conditional SET cannot be told apart from the SETs scripts run, so a
// renewal through SET IFEQ is not counted.
func scripts(before, after map[string]int64) int64 {
	var n int64
	for _, k := range []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro", "delifeq", "delex"} {
		n += after[k] - before[k]
	}
	return n
}

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx

// ctxFor returns a context ending after d (or at the end of the test).
func ctxFor(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}
