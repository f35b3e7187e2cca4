package ratelimit_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// denyListScenarios returns the scenarios of this file.
func denyListScenarios() []scenario {
	return []scenario{
		{Name: "deny_membership", Run: testDenyMembership},
		{Name: "deny_foreign_data", Run: testDenyForeignData},
		{Name: "deny_cache_hits_and_misses", Run: testDenyCacheCounts},
		{Name: "deny_shared_reads", Run: testDenySharedReads},
		{Name: "deny_invalidation", Run: testDenyInvalidation},
		{Name: "deny_outage_cached_decisions", Run: testDenyOutage},
		{Name: "deny_outage_stopped_server", Run: testDenyStoppedServer, StandaloneOnly: true},
		{Name: "deny_limiter_binding", Run: testDenyLimiterBinding},
		{Name: "deny_limiter_queue_recheck", Run: testDenyQueueRecheck},
	}
}

// denyList returns a DenyList over c at key, closed at t.Cleanup.
func denyList(t *testing.T, c rueidis.Client, key string, opts ...denylist.Option) *denylist.List {
	t.Helper()
	dl, err := denylist.New(c, key, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dl.Close(context.Background())) })
	return dl
}

// denyReads returns how many SISMEMBER calls (one per membership read script) every server process
// of the target has run.
func denyReads(t *testing.T, e *env) int64 {
	t.Helper()
	return e.CommandStats(t)["sismember"]
}

// denyIs asserts IsDenied's answer.
func denyIs(t *testing.T, dl *denylist.List, identity string, want bool) {
	t.Helper()
	got, err := dl.IsDenied(ctx(t), identity)
	require.NoError(t, err, "IsDenied(%q)", identity)
	require.Equal(t, want, got, "IsDenied(%q)", identity)
}

// denySet sets identity's membership.
func denySet(t *testing.T, dl *denylist.List, identity string, denied bool) {
	t.Helper()
	require.NoError(t, dl.SetDenied(ctx(t), identity, denied), "SetDenied(%q, %v)", identity, denied)
}

// denyPauseWrites makes the server that owns key hold every script (and write) of other clients
// with CLIENT PAUSE WRITE, so that a membership read stays in flight until the returned function
// (also run at t.Cleanup) unpauses it. Reads that are not scripts (INFO, PING) still run.
func denyPauseWrites(t *testing.T, e *env, key string) (unpause func()) {
	t.Helper()
	node := e.nodeOf(t, key)
	_, err := node.Do(ctx(t), "CLIENT", "PAUSE", "60000", "WRITE")
	require.NoError(t, err)
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			_, err := node.Do(context.Background(), "CLIENT", "UNPAUSE")
			require.NoError(t, err)
		})
	}
	t.Cleanup(unpause)
	return unpause
}

// denyAsync runs IsDenied in a goroutine.
type denyAnswer struct {
	denied bool
	err    error
}

func denyAsync(c context.Context, dl *denylist.List, identity string) <-chan denyAnswer {
	ch := make(chan denyAnswer, 1)
	go func() {
		d, err := dl.IsDenied(c, identity)
		ch <- denyAnswer{d, err}
	}()
	return ch
}

func denyRecv(t *testing.T, ch <-chan denyAnswer) denyAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("IsDenied did not return")
		return denyAnswer{}
	}
}

// denyEventually waits until the deny list's local counters satisfy cond: how a scenario knows a
// caller started or joined a read (assertions are on outcomes, never on how long this took).
func denyEventually(t *testing.T, dl *denylist.List, what string, cond func(denylist.Stats) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(dl.Stats()) }, 20*time.Second, time.Millisecond,
		"%s (stats %+v)", what, dl.Stats())
}

// Set and unset identities; membership is exact, case-sensitive and binary-safe; the key (binary,
// with a binary prefix) is a plain set without expiry.
func testDenyMembership(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	prefix := "\x00deny\xff:"
	name := e.key(t) + ":set\x01\xfe"
	dl := denyList(t, c, name, denylist.WithKeyPrefix(prefix), denylist.WithCacheDuration(0))
	require.Equal(t, name, dl.Key(), "Key is the key as given, without the prefix")
	key := prefix + name

	denyIs(t, dl, "customer:42", false)
	require.False(t, e.exists(t, key), "a read creates nothing")

	denySet(t, dl, "customer:42", true)
	denySet(t, dl, "customer:42", true) // idempotent
	denySet(t, dl, "kunde:äöü", true)
	denySet(t, dl, "bin\x00\xff", true)
	for _, tc := range []struct {
		identity string
		want     bool
	}{
		{"customer:42", true},
		{"Customer:42", false},
		{"CUSTOMER:42", false},
		{"customer:42 ", false},
		{"customer:4", false},
		{"customer:420", false},
		{"kunde:äöü", true},
		{"kunde:ÄÖÜ", false},
		{"bin\x00\xff", true},
		{"bin", false},
	} {
		denyIs(t, dl, tc.identity, tc.want)
	}

	members, err := e.Raw.Do(ctx(t), e.Raw.B().Smembers().Key(key).Build()).AsStrSlice()
	require.NoError(t, err)
	sort.Strings(members)
	require.Equal(t, []string{"bin\x00\xff", "customer:42", "kunde:äöü"}, members)
	require.Equal(t, int64(-1), e.PTTL(t, key), "membership never expires")
	typ, err := e.Raw.Do(ctx(t), e.Raw.B().Type().Key(key).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "set", typ)

	denySet(t, dl, "customer:42", false)
	denySet(t, dl, "customer:42", false) // idempotent
	denyIs(t, dl, "customer:42", false)
	denyIs(t, dl, "kunde:äöü", true)
	denySet(t, dl, "kunde:äöü", false)
	denySet(t, dl, "bin\x00\xff", false)
	require.False(t, e.exists(t, key), "removing the last member deletes the set")

	require.ErrorIs(t, dl.SetDenied(ctx(t), "", true), ratelimit.ErrEmptyIdentity)
	_, err = dl.IsDenied(ctx(t), "")
	require.ErrorIs(t, err, ratelimit.ErrEmptyIdentity)
	require.False(t, e.exists(t, key))
	require.False(t, e.exists(t, name), "nothing was written at the unprefixed key")
}

// A key holding another type is ErrForeignData for reads and writes; nothing is written.
func testDenyForeignData(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	key := e.key(t)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("not a set").Build()).Error())
	dl := denyList(t, c, key)
	_, err := dl.IsDenied(ctx(t), "customer:42")
	require.ErrorIs(t, err, ratelimit.ErrForeignData)
	require.ErrorIs(t, dl.SetDenied(ctx(t), "customer:42", true), ratelimit.ErrForeignData)
	require.ErrorIs(t, dl.SetDenied(ctx(t), "customer:42", false), ratelimit.ErrForeignData)
	require.Equal(t, map[string]string{"": "not a set"}, e.dump(t, key))
	// The error was not cached: once the key is a set, reads work.
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(key).Build()).Error())
	denyIs(t, dl, "customer:42", false)
}

// Hits send nothing to the server; misses send one read; a zero duration always reads; a long
// duration never re-reads within the test, even after another instance changes the set, until
// Invalidate.
func testDenyCacheCounts(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	key := e.key(t)
	long := denyList(t, c, key, denylist.WithCacheDuration(time.Minute))
	writer := denyList(t, c, key)
	denySet(t, writer, "bad", true)

	before := denyReads(t, e)
	denyIs(t, long, "bad", true)
	denyIs(t, long, "good", false)
	require.Equal(t, before+2, denyReads(t, e), "two misses, two reads")
	require.Equal(t, denylist.Stats{Misses: 2, ServerReads: 2, Cached: 2}, long.Stats())

	for range 10 {
		denyIs(t, long, "bad", true)
		denyIs(t, long, "good", false)
	}
	require.Equal(t, before+2, denyReads(t, e), "hits send nothing")
	require.Equal(t, denylist.Stats{Hits: 20, Misses: 2, ServerReads: 2, Cached: 2}, long.Stats())

	// Another instance's write does not reach this cache until expiry or Invalidate.
	denySet(t, writer, "good", true)
	denySet(t, writer, "bad", false)
	denyIs(t, long, "good", false)
	denyIs(t, long, "bad", true)
	require.Equal(t, before+2, denyReads(t, e))
	long.Invalidate()
	require.Zero(t, long.Stats().Cached)
	denyIs(t, long, "good", true)
	denyIs(t, long, "bad", false)
	require.Equal(t, before+4, denyReads(t, e))
	require.Equal(t, denylist.Stats{Hits: 22, Misses: 4, ServerReads: 4, Cached: 2}, long.Stats())

	// A zero duration disables the cache: every call reads.
	zero := denyList(t, c, key, denylist.WithCacheDuration(0))
	before = denyReads(t, e)
	for range 5 {
		denyIs(t, zero, "good", true)
	}
	require.Equal(t, before+5, denyReads(t, e))
	require.Equal(t, denylist.Stats{Misses: 5, ServerReads: 5}, zero.Stats())
}

// 32 concurrent misses for one identity share one server read and get the same answer; the caller
// that started the read is cancelled while it is in flight, and the others still get the answer.
func testDenySharedReads(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute))
	denySet(t, dl, "customer:42", true)
	before := denyReads(t, e)

	unpause := denyPauseWrites(t, e, dl.Key())
	const n = 32
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	first := denyAsync(cctx, dl, "customer:42")
	denyEventually(t, dl, "the first caller starts a read", func(s denylist.Stats) bool { return s.ServerReads == 1 })
	others := make([]<-chan denyAnswer, n-1)
	for i := range others {
		others[i] = denyAsync(ctx(t), dl, "customer:42")
	}
	denyEventually(t, dl, "every caller joins the read", func(s denylist.Stats) bool {
		return s.Misses == n && s.SharedReads == n-1
	})
	cancel()
	a := denyRecv(t, first)
	require.ErrorIs(t, a.err, context.Canceled, "the cancelled caller stops waiting while the read is held")

	unpause()
	for _, ch := range others {
		a := denyRecv(t, ch)
		require.NoError(t, a.err)
		require.True(t, a.denied)
	}
	require.Equal(t, before+1, denyReads(t, e), "one server read for %d callers", n)
	require.Equal(t, denylist.Stats{Misses: n, SharedReads: n - 1, ServerReads: 1, Cached: 1}, dl.Stats())
	denyIs(t, dl, "customer:42", true)
	require.Equal(t, before+1, denyReads(t, e), "the shared read filled the cache")
}

// SetDenied on an instance makes its next read go to the server; Invalidate detaches a read in
// flight: later callers start a fresh read, and the detached one does not fill the cache.
func testDenyInvalidation(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute))

	before := denyReads(t, e)
	denyIs(t, dl, "id", false)
	denyIs(t, dl, "id", false)
	require.Equal(t, before+1, denyReads(t, e))
	denySet(t, dl, "id", true)
	require.Zero(t, dl.Stats().Cached, "SetDenied empties the cache")
	denyIs(t, dl, "id", true)
	require.Equal(t, before+2, denyReads(t, e), "the read after SetDenied goes to the server")
	denySet(t, dl, "id", false)
	denyIs(t, dl, "id", false)
	require.Equal(t, before+3, denyReads(t, e))

	t.Run("later_callers_do_not_join", func(t *testing.T) {
		s0 := dl.Stats()
		unpause := denyPauseWrites(t, e, dl.Key())
		old := denyAsync(ctx(t), dl, "x")
		denyEventually(t, dl, "the first read starts", func(s denylist.Stats) bool { return s.ServerReads == s0.ServerReads+1 })
		dl.Invalidate()
		fresh := denyAsync(ctx(t), dl, "x")
		denyEventually(t, dl, "a fresh read starts", func(s denylist.Stats) bool { return s.ServerReads == s0.ServerReads+2 })
		joined := denyAsync(ctx(t), dl, "x")
		denyEventually(t, dl, "the third caller joins", func(s denylist.Stats) bool { return s.SharedReads == s0.SharedReads+1 })
		unpause()
		for _, ch := range []<-chan denyAnswer{old, fresh, joined} {
			a := denyRecv(t, ch)
			require.NoError(t, a.err)
			require.False(t, a.denied)
		}
		s := dl.Stats()
		require.Equal(t, s0.ServerReads+2, s.ServerReads, "the caller after Invalidate did not join the older read")
		denyIs(t, dl, "x", false)
		require.Equal(t, s.Hits+1, dl.Stats().Hits, "the fresh read filled the cache")
	})

	t.Run("detached_read_does_not_fill", func(t *testing.T) {
		s0 := dl.Stats()
		r0 := denyReads(t, e)
		unpause := denyPauseWrites(t, e, dl.Key())
		old := denyAsync(ctx(t), dl, "y")
		denyEventually(t, dl, "the read starts", func(s denylist.Stats) bool { return s.ServerReads == s0.ServerReads+1 })
		dl.Invalidate()
		unpause()
		a := denyRecv(t, old)
		require.NoError(t, a.err)
		require.False(t, a.denied)
		require.Zero(t, dl.Stats().Cached, "the detached read did not fill the cache")
		denyIs(t, dl, "y", false)
		require.Equal(t, s0.ServerReads+2, dl.Stats().ServerReads)
		require.Equal(t, r0+2, denyReads(t, e), "the next call read the server again")
	})
}

// While the server holds every script, cached decisions are still served without I/O; a miss fails
// (the shared read times out) and its failure is not cached.
func testDenyOutage(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute),
		denylist.WithReadTimeout(300*time.Millisecond))
	denySet(t, dl, "bad", true)
	denyIs(t, dl, "bad", true)
	denyIs(t, dl, "good", false)

	unpause := denyPauseWrites(t, e, dl.Key())
	denyIs(t, dl, "bad", true)
	denyIs(t, dl, "good", false)
	_, err := dl.IsDenied(ctx(t), "unknown")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a miss during the outage fails")
	// A caller with its own shorter deadline stops waiting at it.
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	_, err = dl.IsDenied(short, "unknown2")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	s := dl.Stats()
	require.Equal(t, int64(2), s.Hits)
	unpause()

	// The failure was not cached: the next call reads again and succeeds.
	denyIs(t, dl, "unknown", false)
	require.Equal(t, s.ServerReads+1, dl.Stats().ServerReads)
}

// A stopped server (SIGSTOP): cached decisions are served; a miss returns the caller's deadline
// error; Close ends the shared read still waiting for the server.
func testDenyStoppedServer(t *testing.T, e *env) {
	require.False(t, e.IsCluster(), "stopping the server drives one process: standalone targets only")
	c := e.NewClient(t, nil, matrix.NoCache)
	dl, err := denylist.New(c, e.key(t), denylist.WithCacheDuration(time.Minute))
	require.NoError(t, err)
	denySet(t, dl, "bad", true)
	denyIs(t, dl, "bad", true)
	denyIs(t, dl, "good", false)

	e.Srv.MustPause(t)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			e.Srv.MustResume(t)
			require.Eventually(t, func() bool { return e.Raw.Do(context.Background(), e.Raw.B().Ping().Build()).Error() == nil },
				30*time.Second, 10*time.Millisecond, "server answers again")
		}
	}
	defer resume()
	denyIs(t, dl, "bad", true)
	denyIs(t, dl, "good", false)
	short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	_, err = dl.IsDenied(short, "unknown")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	waiting := denyAsync(ctx(t), dl, "unknown") // joins the shared read held by the stopped server
	denyEventually(t, dl, "the caller joins", func(s denylist.Stats) bool { return s.SharedReads == 1 })
	require.NoError(t, dl.Close(context.Background()))
	a := denyRecv(t, waiting)
	require.ErrorIs(t, a.err, ratelimit.ErrClosed)
	require.Equal(t, denylist.Stats{Hits: 2, Misses: 4, SharedReads: 1, ServerReads: 3}, dl.Stats())
	resume()
}

// denyMeter returns a meter provider whose counters collect can sum.
func denyMeter() (*sdkmetric.MeterProvider, func(t *testing.T, name, reason string) int64) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	return mp, func(t *testing.T, name, reason string) int64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		var n int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != name {
					continue
				}
				sum, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok, "%s is an int64 sum", name)
				for _, dp := range sum.DataPoints {
					for _, kv := range dp.Attributes.ToSlice() {
						require.Equal(t, "reason", string(kv.Key), "only the reason attribute")
					}
					v, _ := dp.Attributes.Value("reason")
					if reason == "" || v.AsString() == reason {
						n += dp.Value
					}
				}
			}
		}
		return n
	}
}

// A limiter bound to a denied identity rejects with ReasonDenyList (also n = 0 probes, n above the
// capacity and WaitN), without RetryAfter and without touching the capacity key; the blocked metric
// counts each denied call once; after unsetting, the limiter admits.
func testDenyLimiterBinding(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	mp, metric := denyMeter()
	defer func() { require.NoError(t, mp.Shutdown(context.Background())) }()
	dl := denyList(t, c, e.key(t))
	policy := ratelimit.FixedWindow{Limit: 5, Window: time.Minute}
	lim := e.limiter(t, c, e.key(t), policy, ratelimit.WithDenyList(dl, "customer:42"),
		ratelimit.WithMeterProvider(mp), ratelimit.WithQueue(5, ratelimit.OldestFirst))
	other := e.limiter(t, c, e.key(t), policy, ratelimit.WithDenyList(dl, "customer:43"),
		ratelimit.WithMeterProvider(mp))

	denySet(t, dl, "customer:42", true)
	reads := denyReads(t, e)
	calls := []struct {
		name string
		call func() (ratelimit.Result, error)
	}{
		{"AllowN(1)", func() (ratelimit.Result, error) { return lim.AllowN(ctx(t), 1) }},
		{"AllowN(0) probe", func() (ratelimit.Result, error) { return lim.AllowN(ctx(t), 0) }},
		{"AllowN above capacity", func() (ratelimit.Result, error) { return lim.AllowN(ctx(t), 6) }},
		{"WaitN(2)", func() (ratelimit.Result, error) { return lim.WaitN(ctx(t), 2) }},
	}
	for _, tc := range calls {
		res, err := tc.call()
		if strings.HasPrefix(tc.name, "WaitN") {
			require.ErrorIs(t, err, ratelimit.ErrDenied, tc.name) // a Wait without admission is an error
		} else {
			require.NoError(t, err, tc.name)
		}
		require.False(t, res.Allowed, tc.name)
		require.Equal(t, ratelimit.ReasonDenyList, res.Reason, tc.name)
		require.Zero(t, res.RetryAfter, tc.name)
		require.Zero(t, res.Remaining, tc.name)
		require.True(t, res.At.IsZero(), "%s: decided without the capacity script", tc.name)
	}
	require.False(t, e.exists(t, lim.Key()), "the capacity key was not touched")
	require.Equal(t, int64(0), lim.Stats().Queued)
	require.Equal(t, reads+1, denyReads(t, e), "one deny-list read, then cache hits")
	require.Equal(t, int64(4), metric(t, "coordkit.rate_limit.blocked", "deny_list"))
	require.Zero(t, metric(t, "coordkit.rate_limit.blocked", "capacity"))
	require.Zero(t, metric(t, "coordkit.rate_limit.allowed", ""))
	require.Equal(t, int64(4), lim.Stats().Rejected)

	// Another identity on the same deny list is admitted.
	res, err := other.Allow(ctx(t))
	require.NoError(t, err)
	require.True(t, res.Allowed)

	denySet(t, dl, "customer:42", false)
	res, err = lim.Allow(ctx(t))
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, int64(4), res.Remaining)
	require.True(t, e.exists(t, lim.Key()))
	require.Equal(t, int64(4), metric(t, "coordkit.rate_limit.blocked", "deny_list"))
	require.Equal(t, int64(2), metric(t, "coordkit.rate_limit.allowed", ""))
	require.Equal(t, ratelimit.Stats{Granted: 1, Rejected: 4, Available: 4}, lim.Stats())

	// A deny-list read error fails the call without deciding and without counting.
	broken := denyList(t, c, e.key(t))
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(broken.Key()).Value("x").Build()).Error())
	blim := e.limiter(t, c, e.key(t), policy, ratelimit.WithDenyList(broken, "customer:42"), ratelimit.WithMeterProvider(mp))
	_, err = blim.Allow(ctx(t))
	require.ErrorIs(t, err, ratelimit.ErrForeignData)
	require.False(t, e.exists(t, blim.Key()))
	require.Equal(t, int64(6), metric(t, "coordkit.rate_limit.blocked", "")+metric(t, "coordkit.rate_limit.allowed", ""))
}

// A queued request rechecks the deny list before its retry: denied while it waited, it leaves the
// queue with ReasonDenyList and consumes nothing. The retry is triggered by an Adopt update that
// raises the limit (so the retry would otherwise be admitted), not by time.
func testDenyQueueRecheck(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(0))
	lim := e.limiter(t, c, e.key(t), ratelimit.FixedWindow{Limit: 1, Window: time.Minute},
		ratelimit.WithDenyList(dl, "customer:42"), ratelimit.WithQueue(1, ratelimit.OldestFirst))
	limExhaust(t, lim, 1)
	ch := limWaitAsync(ctx(t), lim, "queued", 1)
	limWaitQueued(t, lim, 1)
	denySet(t, dl, "customer:42", true)
	reads := dl.Stats().ServerReads
	require.NoError(t, lim.Update(ctx(t), ratelimit.FixedWindow{Limit: 2, Window: time.Minute}, ratelimit.Adopt))
	o := limRecv(t, ch)
	require.ErrorIs(t, o.err, ratelimit.ErrDenied)
	require.False(t, o.res.Allowed)
	require.Equal(t, ratelimit.ReasonDenyList, o.res.Reason)
	require.Zero(t, o.res.RetryAfter)
	require.Greater(t, dl.Stats().ServerReads, reads, "the retry read the deny list again")
	require.Equal(t, "1", e.dump(t, lim.Key())["0.n"], "the queued request consumed nothing")
	st := lim.Stats()
	require.Equal(t, int64(0), st.Queued)
	require.Equal(t, int64(1), st.Granted)
	require.Equal(t, int64(1), st.Rejected)
}
