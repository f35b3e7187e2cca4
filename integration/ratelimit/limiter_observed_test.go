package ratelimit_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// Limiter behaviour observed on the server: each scenario asserts on script counts, stored state,
// clients held on a script, server times (Result.At) or outcomes, never on how long something took.
// limiterObservedScenarios returns the scenarios of this file.
func limiterObservedScenarios() []scenario {
	return []scenario{
		{Name: "limiter_idle_duration_value", Run: limIdleDuration},
		{Name: "limiter_metrics_keyed_outcomes", Run: limMetricsKeyed},
		{Name: "limiter_queue_never_polls", Run: limQueueNeverPolls},
		{Name: "limiter_update_barrier_active_finish_new_wait", Run: limUpdateBarrier},
		{Name: "limiter_update_serialized", Run: limUpdateSerialized},
	}
}

// unpipelinedClient returns a client that sends every command on its own pooled connection, so that the
// server lists each script in flight as its own client (CLIENT LIST): scripts held by CLIENT PAUSE can
// then be counted.
func unpipelinedClient(t *testing.T, e *env) rueidis.Client {
	t.Helper()
	return e.NewClient(t, nil, matrix.NoCache, func(o *rueidis.ClientOption) { o.DisableAutoPipelining = true })
}

// scriptsHeld returns how many clients of the server owning key are held on a script (CLIENT LIST: flags
// with b, cmd=evalsha or eval) by CLIENT PAUSE.
func scriptsHeld(t *testing.T, e *env, key string) int {
	t.Helper()
	v, err := e.nodeOf(t, key).Do(ctx(t), "CLIENT", "LIST")
	require.NoError(t, err)
	list, err := v.ToString()
	require.NoError(t, err)
	held := 0
	for _, line := range strings.Split(list, "\n") {
		var flags, cmd string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "flags="); ok {
				flags = v
			}
			if v, ok := strings.CutPrefix(f, "cmd="); ok {
				cmd = v
			}
		}
		if strings.Contains(flags, "b") && (cmd == "evalsha" || cmd == "eval") {
			held++
		}
	}
	return held
}

// waitInside waits until at least n goroutines are inside the exported method (*ratelimit.Limiter).<method>
// (from their stacks): how a scenario knows that calls started in other goroutines are in progress.
func waitInside(t *testing.T, method string, n int) {
	t.Helper()
	frame := "ratelimit.(*Limiter)." + method + "("
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		for {
			m := runtime.Stack(buf, true)
			if m < len(buf) {
				buf = buf[:m]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		count := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, frame) {
				count++
			}
		}
		return count >= n
	}, 20*time.Second, time.Millisecond, "%d goroutine(s) inside Limiter.%s", n, method)
}

// A WaitN queued behind a long RetryAfter sends no script while it waits: the request makes exactly
// two attempts (the rejected one that queued it, and the retry at the server-computed time), and the
// retry is admitted in the next window. A pump that polled, or retried before the window's end, would
// run more scripts.
func limQueueNeverPolls(t *testing.T, e *env) {
	const window = 800 * time.Millisecond
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 1, Window: window},
		ratelimit.WithQueue(1, ratelimit.OldestFirst))
	first := limExhaust(t, l, 1)
	st := e.dump(t, key)
	end := engInt(st, "0.e")
	require.Equal(t, "1", st["0.n"])
	require.Equal(t, first.At.UnixMicro()+window.Microseconds(), end, "the window starts at the acquisition")

	// No EVAL (dump) between the snapshots: only the limiter's scripts are counted.
	before := limScripts(t, e)
	w := limWaitAsync(ctx(t), l, "w", 1)
	limWaitQueued(t, l, 1)
	require.Equal(t, before+1, limScripts(t, e), "queued after one rejected attempt")
	o := limRecv(t, w)
	require.NoError(t, o.err)
	require.True(t, o.res.Allowed, "%+v", o.res)
	require.Equal(t, before+2, limScripts(t, e),
		"the queued request sent only its first attempt and one retry at the server-computed time")
	require.GreaterOrEqual(t, o.res.At.UnixMicro(), end, "admitted at or after the stored window end")

	st = e.dump(t, key)
	require.Equal(t, "1", st["0.n"], "a new window holds the retry's permit")
	require.Equal(t, o.res.At.UnixMicro()+window.Microseconds(), engInt(st, "0.e"))
	stats := l.Stats()
	require.Equal(t, int64(2), stats.Granted)
	require.Zero(t, stats.Rejected, "the queued request's rejected attempt is not a final outcome")
}

// The update barrier on a real server: an attempt whose script the server holds (CLIENT PAUSE WRITE)
// is active while Update runs. New attempts wait (a probe that would be decided locally once past the
// barrier returns its cancelled context's error instead), the migration is not sent while the attempt
// is active (only one script is held), the active attempt finishes with the old settings, and an
// attempt started during the update is decided with the new ones. A composite makes the server
// enforce the order: a script with the old signature after the migration, or one with the new
// signature before it, is a configuration mismatch.
func limUpdateBarrier(t *testing.T, e *env) {
	key := e.key(t)
	oldP := ratelimit.Composite{Components: []ratelimit.Component{ratelimit.FixedWindow{Limit: 5, Window: time.Minute}}}
	newP := ratelimit.Composite{Components: []ratelimit.Component{ratelimit.FixedWindow{Limit: 10, Window: time.Minute}}}
	l := e.limiter(t, unpipelinedClient(t, e), key, oldP)
	res, err := l.AllowN(ctx(t), 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	oldSig := e.dump(t, key)["S"]
	require.NotEmpty(t, oldSig)

	c := ctx(t)
	unpause := denyPauseWrites(t, e, key)
	active := make(chan limOutcome, 1)
	go func() {
		res, err := l.AllowN(c, 2)
		active <- limOutcome{name: "active", res: res, err: err}
	}()
	waitScriptsHeld(t, e, key, 1)
	upd := make(chan error, 1)
	go func() { upd <- l.Update(c, newP, ratelimit.Migrate) }()

	// Past the barrier, a request above the capacity is decided locally and ignores its (cancelled)
	// context; held at the barrier, it returns the context's error.
	cancelled, cancel := context.WithCancel(c)
	cancel()
	require.Eventually(t, func() bool {
		_, err := l.AllowN(cancelled, 11)
		return errors.Is(err, context.Canceled)
	}, 20*time.Second, time.Millisecond, "new attempts never waited for the update")
	_, err = l.AllowN(cancelled, 11)
	require.ErrorIs(t, err, context.Canceled, "a new attempt waits at the barrier")
	require.NotErrorIs(t, err, ratelimit.ErrUncertain, "nothing was sent")

	late := make(chan limOutcome, 1)
	go func() {
		res, err := l.AllowN(c, 3)
		late <- limOutcome{name: "late", res: res, err: err}
	}()
	waitInside(t, "AllowN", 2) // the active attempt and the late one
	require.Equal(t, 1, scriptsHeld(t, e, key),
		"only the active attempt's script is on the server: neither the migration nor the late attempt was sent")
	select {
	case err := <-upd:
		t.Fatalf("Update returned %v while an attempt was active", err)
	case o := <-late:
		t.Fatalf("an attempt started during the update was decided: %+v %v", o.res, o.err)
	default:
	}
	require.Equal(t, oldP, l.Policy(), "not published while the attempt is active")

	unpause()
	a := limRecv(t, active)
	require.NoError(t, a.err, "the active attempt ran before the migration (else: configuration mismatch)")
	require.True(t, a.res.Allowed)
	require.Equal(t, int64(5), a.res.Limit, "decided with the old settings")
	require.Equal(t, int64(2), a.res.Remaining)
	require.NoError(t, <-upd)
	b := limRecv(t, late)
	require.NoError(t, b.err, "the late attempt ran after the migration (else: configuration mismatch)")
	require.True(t, b.res.Allowed, "%+v", b.res)
	require.Equal(t, int64(10), b.res.Limit, "decided with the new settings")
	require.Equal(t, int64(4), b.res.Remaining, "1 + 2 + 3 of 10")
	require.False(t, b.res.At.Before(a.res.At))

	st := e.dump(t, key)
	require.Equal(t, "6", st["0.n"], "the migration kept the active attempt's permits")
	require.NotEqual(t, oldSig, st["S"], "the new signature is stored")
	require.Equal(t, newP, l.Policy())
}

// gcraMigrated is engine_gcra.lua's migration of a TAT at server time now (ms), from the emission
// interval oldT to newT: the debt rescaled and rounded up to whole ms; no debt stays as it is.
func gcraMigrated(tat, now, oldT, newT int64) int64 {
	if tat <= now {
		return tat
	}
	debt := tat - now
	q, r := debt/oldT, debt%oldT
	return now + q*newT + (r*newT+oldT-1)/oldT
}

// gcraTwoMigrations returns the range of the TAT after migrating tat from t0 to t1 at m1 and then from
// t1 to t2 at m2, over lo <= m1 <= m2 <= hi (the extremes lie at the corners, up to 1 µs of rounding).
func gcraTwoMigrations(tat, lo, hi, t0, t1, t2 int64) (minTAT, maxTAT int64) {
	minTAT, maxTAT = int64(1<<62), int64(-1<<62)
	for _, m := range [][2]int64{{lo, lo}, {lo, hi}, {hi, hi}} {
		v := gcraMigrated(gcraMigrated(tat, m[0], t0, t1), m[1], t1, t2)
		minTAT, maxTAT = min(minTAT, v), max(maxTAT, v)
	}
	return minTAT - 1, maxTAT + 1
}

// Two concurrent Updates of one limiter are serialized: while the first one's migration is held by
// the server, the second is in Update but sends nothing; the final settings are one of them, and the
// stored GCRA debt was rescaled twice in that order (t0 → ta → tb gives about 4× the debt, t0 → tb →
// ta about 2×; two migrations both from t0 would give about 8×).
func limUpdateSerialized(t *testing.T, e *env) {
	const burst = 100
	const t0, ta, tb = int64(1000000), int64(2000000), int64(4000000) // emission intervals, µs
	gcra := func(us int64) ratelimit.GCRA {
		return ratelimit.GCRA{Burst: burst, EmissionInterval: time.Duration(us) * time.Microsecond}
	}
	key := e.key(t)
	l := e.limiter(t, unpipelinedClient(t, e), key, gcra(t0))
	res, err := l.AllowN(ctx(t), 50)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	lo := res.At.UnixMicro()
	tat0 := lo + res.Reset.Microseconds()
	require.Equal(t, lo+50*t0, tat0)
	require.Equal(t, "u"+strconv.FormatInt(tat0, 10), e.dump(t, key)[""])

	c := ctx(t)
	unpause := denyPauseWrites(t, e, key)
	errs := make(chan error, 2)
	go func() { errs <- l.Update(c, gcra(ta), ratelimit.Migrate) }()
	go func() { errs <- l.Update(c, gcra(tb), ratelimit.Migrate) }()
	waitScriptsHeld(t, e, key, 1)
	waitInside(t, "Update", 2)
	require.Equal(t, 1, scriptsHeld(t, e, key), "one migration at a time")
	unpause()
	for range 2 {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("an Update did not return")
		}
	}
	hi := e.serverMicros(t, key)
	raw := e.dump(t, key)[""]
	tat, err := strconv.ParseInt(strings.TrimPrefix(raw, "u"), 10, 64)
	require.NoError(t, err, "stored TAT %q", raw)

	abMin, abMax := gcraTwoMigrations(tat0, lo, hi, t0, ta, tb)
	baMin, baMax := gcraTwoMigrations(tat0, lo, hi, t0, tb, ta)
	require.Less(t, baMax, abMin, "the two orders are told apart (server times %d..%d)", lo, hi)
	final := l.Policy()
	t.Logf("final %v, TAT %d (a→b %d..%d, b→a %d..%d)", final, tat, abMin, abMax, baMin, baMax)
	switch final {
	case gcra(tb):
		require.True(t, tat >= abMin && tat <= abMax, "ta then tb: TAT %d not in %d..%d", tat, abMin, abMax)
	case gcra(ta):
		require.True(t, tat >= baMin && tat <= baMax, "tb then ta: TAT %d not in %d..%d", tat, baMin, baMax)
	default:
		t.Fatalf("final policy %v is neither update", final)
	}
}

// keyedStats adapts one key of a Keyed to limWaitQueued.
type keyedStats struct {
	k   *ratelimit.Keyed
	key string
}

func (s keyedStats) Stats() ratelimit.Stats { return s.k.KeyStats(s.key) }

// The Keyed path (stateless AllowN, as the HTTP middleware uses, and WaitN through per-key state)
// counts every final outcome once, with the right reason and no other attribute: admissions (a probe
// included), capacity rejections, requests above the capacity, deny-listed keys (AllowN and WaitN) and
// a full queue. Errors and a cancelled waiter count nothing.
func limMetricsKeyed(t *testing.T, e *env) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	client := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, client, e.key(t), denylist.WithCacheDuration(0))
	k, err := ratelimit.NewKeyed(client, ratelimit.FixedWindow{Limit: 2, Window: time.Minute},
		ratelimit.WithMeterProvider(mp), ratelimit.WithQueue(1, ratelimit.OldestFirst),
		ratelimit.WithKeyedDenyList(dl, nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close(context.Background()) })

	base := e.key(t)
	k1, k2, k3, bad := base+":k1", base+":k2", base+":k3", base+":bad"
	denySet(t, dl, bad, true)

	// step runs call and asserts that the counters moved by want (one outcome, or none for "").
	step := func(name, want string, call func() (ratelimit.Result, error)) ratelimit.Result {
		t.Helper()
		before := limCounts(t, reader)
		res, err := call()
		if want == "" {
			require.Error(t, err, name)
		} else if strings.Contains(name, "WaitN") && want != "allowed" {
			require.Error(t, err, name) // a Wait without admission is an error, counted once
		} else {
			require.NoError(t, err, name)
		}
		after := limCounts(t, reader)
		for _, c := range []string{"allowed", "blocked:capacity", "blocked:deny_list"} {
			d := after[c] - before[c]
			if c == want {
				require.Equal(t, int64(1), d, "%s: %s counted once", name, c)
			} else {
				require.Zero(t, d, "%s: %s not counted", name, c)
			}
		}
		return res
	}
	allow := func(key string, n int64) func() (ratelimit.Result, error) {
		return func() (ratelimit.Result, error) { return k.AllowN(ctx(t), key, n) }
	}

	step("admitted", "allowed", allow(k1, 1))
	step("admitted again", "allowed", allow(k1, 1))
	res := step("capacity", "blocked:capacity", allow(k1, 1))
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	require.Positive(t, res.RetryAfter)
	res = step("above the capacity", "blocked:capacity", allow(k1, 3))
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	require.Zero(t, res.RetryAfter)
	step("negative", "", allow(k1, -1))
	step("empty key", "", allow("", 1))
	step("probe", "allowed", allow(k3, 0))
	res = step("deny-listed AllowN", "blocked:deny_list", allow(bad, 1))
	require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
	res = step("deny-listed WaitN", "blocked:deny_list", func() (ratelimit.Result, error) { return k.WaitN(ctx(t), bad, 1) })
	require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
	require.False(t, e.exists(t, bad), "no capacity touched")
	require.Equal(t, 1, k.KeyCount(), "only WaitN created local state (for the denied key)")

	step("exhaust k2", "allowed", allow(k2, 2))
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	before := limCounts(t, reader)
	w := make(chan limOutcome, 1)
	go func() {
		res, err := k.WaitN(cctx, k2, 1)
		w <- limOutcome{name: "queued", res: res, err: err}
	}()
	limWaitQueued(t, keyedStats{k, k2}, 1)
	require.Equal(t, before, limCounts(t, reader), "a queued request is not an outcome yet")
	res = step("queue full WaitN", "blocked:capacity", func() (ratelimit.Result, error) { return k.WaitN(ctx(t), k2, 1) })
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	before = limCounts(t, reader)
	cancel()
	require.ErrorIs(t, limRecv(t, w).err, context.Canceled)
	require.Equal(t, before, limCounts(t, reader), "a cancelled waiter is not counted")

	require.Equal(t, map[string]int64{
		"allowed":           4,
		"blocked:capacity":  3,
		"blocked:deny_list": 2,
	}, limCounts(t, reader))
}

// IdleDuration reports ok=false while a WaitN waits in the queue, and once the last call has returned
// a duration counted from that call's end: at least the time since it returned, at most the time
// since a moment it was still in progress, and growing. Bounds come from the local monotonic clock
// around the calls, so they hold however slow the machine is.
func limIdleDuration(t *testing.T, e *env) {
	const window = 500 * time.Millisecond
	key := e.key(t)
	l := e.limiter(t, nil, key, ratelimit.FixedWindow{Limit: 1, Window: window},
		ratelimit.WithQueue(1, ratelimit.OldestFirst))
	_, ok := l.IdleDuration()
	require.True(t, ok, "idle since New")

	startAllow := time.Now()
	limExhaust(t, l, 1)
	d, ok := l.IdleDuration()
	require.True(t, ok, "idle after AllowN returned")
	require.LessOrEqual(t, d, time.Since(startAllow), "counted from the end of AllowN, not from New")

	type done struct {
		res ratelimit.Result
		err error
		end time.Time
	}
	ch := make(chan done, 1)
	c := ctx(t)
	go func() {
		res, err := l.WaitN(c, 1)
		ch <- done{res, err, time.Now()}
	}()
	limWaitQueued(t, l, 1)
	busyAt := time.Now()
	_, ok = l.IdleDuration()
	require.False(t, ok, "a queued WaitN is in progress")
	var o done
	select {
	case o = <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the queued WaitN did not return")
	}
	require.NoError(t, o.err)
	require.True(t, o.res.Allowed)

	readFrom := time.Now()
	d1, ok := l.IdleDuration()
	readTo := time.Now()
	require.True(t, ok, "idle after WaitN returned")
	require.GreaterOrEqual(t, d1, readFrom.Sub(o.end), "idle at least since WaitN returned")
	require.LessOrEqual(t, d1, readTo.Sub(busyAt), "idle only since after WaitN was seen in progress")
	d2, ok := l.IdleDuration()
	require.True(t, ok)
	require.GreaterOrEqual(t, d2, d1)
	require.Eventually(t, func() bool {
		d, ok := l.IdleDuration()
		return ok && d > d1
	}, 20*time.Second, time.Millisecond, "the idle duration grows")
}
