package resharding_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/hooktest"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/testkit"
)

// rounds is the number of slot migrations: to another primary and back, three times.
const rounds = 6

// The keys under test share the hash tag {rs}, so all of them are in one slot. The lock "rs" has the
// keys {rs}:lease and {rs}:fence: its acquisition is a two-key script, which an importing node refuses
// with TRYAGAIN while one of the keys is absent (and a migrating node while it holds one and not the
// other: a free lock has no lease key). GetMany of the two counters is one two-key MGET, refused the
// same way while one counter has moved and the other not. The increments and the rate-limit decision
// are one-key scripts: the servers answer them with ASK, which rueidis follows.
const (
	tag      = "{rs}"
	lockName = "rs"
	counter1 = tag + ":c1"
	counter2 = tag + ":c2"
	limitKey = tag + ":rl"
)

// TestResharding migrates the slot of the keys under test back and forth, one key per MIGRATE, while
// callers run lock try-acquisitions and releases, rate-limit decisions, counter increments (one key
// and batched) and two-key counter reads. No caller may see TRYAGAIN (unless its call outlived
// luakit.TryAgainBudget: then the reply must classify as transient), every increment and admission
// must be counted exactly, fencing tokens must increase, and each call must be one hook completion.
// The servers' own TRYAGAIN count (INFO errorstats) shows the condition was met.
func TestResharding(t *testing.T) {
	ran := false
	for _, mt := range matrix.Targets() {
		if !mt.Cluster {
			continue
		}
		ran = true
		t.Run(mt.Name, func(t *testing.T) { reshard(t, mt) })
	}
	if !ran {
		// Skipped only outside CI: in CI a suite that ran on no server is a failure.
		testkit.FailOrSkip(t, fmt.Errorf("%w: no Cluster target selected (see COORDKIT_CLUSTERS)", testkit.ErrUnavailable))
	}
}

// worker is one caller's tally.
type worker struct {
	name string
	// multiKey: its commands can meet TRYAGAIN, so the migrator waits for it to have a call in flight
	// in each migration step but never for a call to end (the call may be waiting for that step).
	multiKey bool
	started  atomic.Int64 // calls begun
	done     atomic.Int64 // calls returned
	ok       atomic.Int64 // calls that succeeded (for counters: units counted)
	tryAgain atomic.Int64 // TRYAGAIN errors returned
	late     atomic.Int64 // of those, returned after the call ran for at least luakit.TryAgainBudget
	slowest  atomic.Int64 // longest call, ns

	mu   sync.Mutex
	errs []string // unexpected errors (first few)
}

func (w *worker) unexpected(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < 10 {
		w.errs = append(w.errs, fmt.Sprintf(format, args...))
	}
}

// call runs one call of op, timing it and sorting its error: TRYAGAIN is counted (and, after the
// budget, must still be transient), any other error is unexpected.
func (w *worker) call(op func() error) {
	w.started.Add(1)
	defer w.done.Add(1)
	begin := time.Now()
	err := op()
	took := time.Since(begin)
	for {
		s := w.slowest.Load()
		if int64(took) <= s || w.slowest.CompareAndSwap(s, int64(took)) {
			break
		}
	}
	if err == nil {
		return
	}
	if isTryAgain(err) {
		w.tryAgain.Add(1)
		if took >= luakit.TryAgainBudget {
			w.late.Add(1)
			if !luakit.IsTransient(err) {
				w.unexpected("TRYAGAIN after %v that does not classify as transient: %v", took, err)
			}
		}
		return
	}
	w.unexpected("%v", err)
}

// isTryAgain reports a TRYAGAIN reply anywhere in err's chain or text.
func isTryAgain(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && re.IsTryAgain() || strings.Contains(err.Error(), "TRYAGAIN")
}

func reshard(t *testing.T, mt matrix.Target) {
	e := matrix.StartEnv(t, mt)
	ctx := matrix.Ctx(t)
	cl := e.Cluster
	c := cl.Client(t)
	slot := testkit.KeySlot(tag)
	home, err := cl.PrimaryOf(ctx, slot)
	require.NoError(t, err)
	away := cl.Nodes[0]
	for _, n := range cl.Nodes[:3] {
		if n != home {
			away = n
			break
		}
	}

	hooks := &hooktest.Recorder{}
	lk, err := lock.New(c, lock.WithHooks(hooks))
	require.NoError(t, err)
	st, err := counter.New(c, counter.WithHooks(hooks))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	const limit = int64(1) << 40
	lim, err := ratelimit.New(c, limitKey, ratelimit.FixedWindow{Limit: limit, Window: time.Hour}, ratelimit.WithHooks(hooks))
	require.NoError(t, err)
	t.Cleanup(func() { _ = lim.Close(context.Background()) })

	// Every key exists before the first migration (the lock's fence key too), so each one moves.
	l, err := lk.TryAcquire(ctx, lockName, time.Minute)
	require.NoError(t, err)
	first := l.FencingToken()
	_, err = l.Release(ctx)
	require.NoError(t, err)
	_, err = st.IncrementWithExpire(ctx, counter1, 1, 0)
	require.NoError(t, err)
	_, err = st.IncrementWithExpire(ctx, counter2, 1, 0)
	require.NoError(t, err)
	res, err := lim.Allow(ctx)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	hooks.Take()
	for _, n := range cl.Nodes {
		_, err := n.Do(ctx, "CONFIG", "RESETSTAT")
		require.NoError(t, err)
	}

	var (
		lockers  = []*worker{{name: "lock try-acquire A", multiKey: true}, {name: "lock try-acquire B", multiKey: true}}
		incr     = &worker{name: "counter increment"}
		batch    = &worker{name: "counter batch increment"}
		getMany  = &worker{name: "counter get many", multiKey: true}
		decide   = &worker{name: "rate limit allow"}
		workers  = append(append([]*worker{}, lockers...), incr, batch, getMany, decide)
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		tokensMu sync.Mutex
		tokens   = map[int64]string{}
	)
	loop := func(w *worker, op func() error) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				w.call(op)
			}
		})
	}
	for _, w := range lockers {
		var last int64
		loop(w, func() error {
			l, err := lk.TryAcquire(ctx, lockName, time.Minute)
			if errors.Is(err, lock.ErrNotAcquired) {
				return nil // the other locker holds it
			}
			if err != nil {
				return err
			}
			tok := l.FencingToken()
			tokensMu.Lock()
			prev, dup := tokens[tok]
			tokens[tok] = w.name
			tokensMu.Unlock()
			if dup {
				w.unexpected("fencing token %d granted twice (%s, %s)", tok, prev, w.name)
			}
			if tok <= last {
				w.unexpected("fencing token %d after %d", tok, last)
			}
			last = tok
			w.ok.Add(1)
			if _, err := l.Release(ctx); err != nil {
				w.unexpected("release: %v", err)
			}
			return nil
		})
	}
	loop(incr, func() error {
		_, err := st.IncrementWithExpire(ctx, counter1, 1, 0)
		if err == nil {
			incr.ok.Add(1)
		}
		return err
	})
	loop(batch, func() error {
		_, err := st.BatchIncrement(ctx, []counter.Increment{{Key: counter2, Delta: 1}, {Key: counter2, Delta: 1}})
		var be *counter.BatchError
		if errors.As(err, &be) {
			for _, e := range be.Errs {
				if e == nil {
					batch.ok.Add(1)
				}
			}
			return err
		}
		if err == nil {
			batch.ok.Add(2)
		}
		return err
	})
	var seen [2]int64
	loop(getMany, func() error {
		vs, err := st.GetMany(ctx, []string{counter1, counter2})
		if err != nil {
			return err
		}
		for i, v := range vs {
			if !v.Exists || v.N < seen[i] {
				getMany.unexpected("counter %d read %+v after %d", i+1, v, seen[i])
			}
			seen[i] = v.N
		}
		getMany.ok.Add(1)
		return nil
	})
	loop(decide, func() error {
		r, err := lim.Allow(ctx)
		if err == nil && !r.Allowed {
			decide.unexpected("decision refused: %+v", r)
		}
		if err == nil && r.Allowed {
			decide.ok.Add(1)
		}
		return err
	})

	// progress waits until every one-key worker has finished two calls since it was called (those
	// never wait on the migration) and every multi-key worker has a call in flight or has begun one.
	progress := func() {
		t.Helper()
		mark := make([][2]int64, len(workers))
		for i, w := range workers {
			mark[i] = [2]int64{w.started.Load(), w.done.Load()}
		}
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < len(workers); {
			w := workers[i]
			started, done := w.started.Load(), w.done.Load()
			// A multi-key call in flight counts: it may be waiting for this step to end.
			if w.multiKey && (started > mark[i][0] || started > done) || done > mark[i][1]+1 {
				i++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s made no progress in 20s", w.name)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}

	var windows []time.Duration
	s := strconv.Itoa(slot)
	func() {
		defer func() {
			close(stop)
			wg.Wait()
		}()
		progress() // every worker runs before the first migration
		for r := range rounds {
			to := away
			if r%2 == 1 {
				to = home
			}
			began := time.Now()
			m, err := cl.BeginMigration(ctx, slot, to, testkit.MigrateOptions{Batch: 1})
			require.NoError(t, err)
			progress()
			moved := 0
			for {
				msg, err := m.From.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, "1")
				require.NoError(t, err)
				keys, err := msg.AsStrSlice()
				require.NoError(t, err)
				if len(keys) == 0 {
					break
				}
				require.NoError(t, m.MoveKeys(ctx, keys...))
				moved++
				progress() // the keys are split between the two nodes now
			}
			require.NoError(t, m.Finish(ctx))
			windows = append(windows, time.Since(began))
			require.GreaterOrEqual(t, moved, 4, "round %d moved too few keys", r)
		}
	}()

	var served int64
	for _, n := range cl.Nodes {
		served += tryAgainServed(ctx, t, n)
	}
	var total, late int64
	for _, w := range workers {
		t.Logf("%-24s calls %6d  ok %6d  TRYAGAIN returned %4d (after the budget: %d)  slowest %v",
			w.name, w.done.Load(), w.ok.Load(), w.tryAgain.Load(), w.late.Load(), time.Duration(w.slowest.Load()))
		total += w.tryAgain.Load()
		late += w.late.Load()
		for _, msg := range w.errs {
			t.Errorf("%s: %s", w.name, msg)
		}
	}
	t.Logf("%d migrations of slot %d between %s and %s, each %v; the servers answered TRYAGAIN %d times",
		rounds, slot, home.Addr, away.Addr, windows, served)
	require.Positive(t, served, "no call met TRYAGAIN on the servers: the test did not exercise a migration")
	assert.Equal(t, late, total, "TRYAGAIN reached callers within luakit.TryAgainBudget (%v)", luakit.TryAgainBudget)

	// Nothing lost: every increment and admission counted, every grant a new token.
	v1, err := st.Get(ctx, counter1)
	require.NoError(t, err)
	require.Equal(t, 1+incr.ok.Load(), v1, "counter increments")
	v2, err := st.Get(ctx, counter2)
	require.NoError(t, err)
	require.Equal(t, 1+batch.ok.Load(), v2, "batched counter increments")
	ins, err := lim.Inspect(ctx)
	require.NoError(t, err)
	require.Equal(t, 1+decide.ok.Load(), limit-ins.Remaining, "rate-limit admissions")
	fence, err := e.Raw.Do(ctx, e.Raw.B().Get().Key(tag+":fence").Build()).AsInt64()
	require.NoError(t, err)
	grants := lockers[0].ok.Load() + lockers[1].ok.Load()
	require.Equal(t, first+grants, fence, "every grant took one fencing token")
	require.Len(t, tokens, int(grants))

	// One hook completion per call, retries included.
	calls := map[string]int64{}
	for _, w := range workers {
		calls[w.name] = w.done.Load()
	}
	done := map[string]int64{}
	for _, line := range hooks.Take() {
		if name, ok := strings.CutPrefix(line, "done "); ok {
			done[name[:strings.LastIndexByte(name, ' ')]]++
		}
	}
	// Each granted lock adds one LOCK RELEASE; the final reads add one COUNTER GET each and one RATE
	// LIMIT INSPECT.
	require.Equal(t, calls["lock try-acquire A"]+calls["lock try-acquire B"], done["LOCK TRY ACQUIRE"])
	require.Equal(t, grants, done["LOCK RELEASE"])
	require.Equal(t, calls["counter increment"], done["COUNTER INCREMENT WITH EXPIRE"])
	require.Equal(t, calls["counter batch increment"], done["COUNTER BATCH INCREMENT"])
	require.Equal(t, calls["counter get many"], done["COUNTER GET MANY"])
	require.Equal(t, calls["rate limit allow"], done["RATE LIMIT ACQUIRE"])
}

// tryAgainServed reads how many TRYAGAIN replies n sent since the last CONFIG RESETSTAT.
func tryAgainServed(ctx context.Context, t *testing.T, n *testkit.Server) int64 {
	t.Helper()
	msg, err := n.Do(ctx, "INFO", "errorstats")
	require.NoError(t, err)
	info, err := msg.ToString()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_TRYAGAIN:count=")
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, ','); i >= 0 {
			rest = rest[:i]
		}
		v, err := strconv.ParseInt(rest, 10, 64)
		require.NoError(t, err)
		return v
	}
	return 0
}
