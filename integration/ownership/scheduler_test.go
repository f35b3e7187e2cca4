package ownership_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
)

// manyHandles is one kind's way of taking n holds from one factory (so one Config, so one keep-alive
// scheduler) over cs.
type manyHandles struct {
	name   string
	quorum bool
	needs  func(e *env) string
	take   func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle
}

// takeN runs acquire for i in [0, n) on 32 goroutines (the client pipelines them), failing on an error.
func takeN(t *testing.T, n int, acquire func(ctx context.Context, i int) (handle, error)) []handle {
	t.Helper()
	hs := make([]handle, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				hs[i], errs[i] = acquire(context.Background(), i)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "acquisition %d", i)
	}
	return hs
}

var manyKinds = []manyHandles{
	{name: "lock", needs: always, take: func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle {
		l, err := lock.New(cs[0])
		require.NoError(t, err)
		return takeN(t, n, func(ctx context.Context, i int) (handle, error) {
			return asHandle(l.TryAcquire(ctx, lockName(fmt.Sprintf("many-%d", i)), ttl))
		})
	}},
	{name: "lease", needs: hashFieldTTL, take: func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle {
		ls, err := lease.New(cs[0])
		require.NoError(t, err)
		return takeN(t, n, func(ctx context.Context, i int) (handle, error) {
			return asHandle(ls.TryAcquire(ctx, leaseHash("many"), fmt.Sprintf("f%d", i), ttl))
		})
	}},
	{name: "rwlock-read", needs: always, take: func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle {
		l, err := rwlock.New(cs[0])
		require.NoError(t, err)
		return takeN(t, n, func(ctx context.Context, _ int) (handle, error) {
			return asHandle(l.TryAcquireRead(ctx, rwKey("many"), ttl))
		})
	}},
	{name: "semaphore", needs: always, take: func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle {
		s, err := semaphore.New(cs[0], semKey("many"), int64(n))
		require.NoError(t, err)
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.Close(sctx); err != nil {
				t.Errorf("semaphore close: %v", err)
			}
		})
		return takeN(t, n, func(ctx context.Context, _ int) (handle, error) { return asHandle(s.TryAcquire(ctx, ttl)) })
	}},
	{name: "redlock", quorum: true, needs: standaloneOnly, take: func(t *testing.T, cs []rueidis.Client, n int, ttl time.Duration) []handle {
		g, err := redlock.NewGroup(cs, redlock.WithRestartQuarantine(false))
		require.NoError(t, err)
		return takeN(t, n, func(ctx context.Context, i int) (handle, error) {
			return asHandle(g.TryAcquire(ctx, redKey(fmt.Sprintf("many-%d", i)), ttl))
		})
	}},
}

// TestKeepAliveSharedScheduler: for every kind, 1,000 holds of one factory on one client keep alive
// through one scheduler: the process gains at most its timer goroutine and
// ownership.MaxRenewalsInFlight renewal goroutines (redlock: with one more per node each, for its
// fan-out), never one per hold, while the servers run at least two renewals per hold; ending one handle's
// KeepAlive ctx stops that handle's renewals (its estimate stays where it was, nothing is released)
// while the other handles keep being renewed; and once all are released the scheduler's goroutines
// end (goleak in TestMain).
//
// The targets run one after another, and only goroutines that the ownership core and redlock started
// are counted (schedulerGoroutines): the client's own, and other tests', do not count.
func TestKeepAliveSharedScheduler(t *testing.T) {
	for _, mt := range matrix.Targets() {
		t.Run(mt.Name, func(t *testing.T) { testKeepAliveSharedScheduler(t, mt) })
	}
}

// renewals counts the renewals the servers ran between two commandstats readings: scripts, and SET
// (a lock's renewal is SET ... IFEQ where the server has it; no script of a renewal runs SET).
func renewals(before, after map[string]int64) int64 {
	return scripts(before, after) + after["set"] - before["set"]
}

// schedulerGoroutines counts the live goroutines created by the ownership core (the scheduler's timer
// and its renewals) or by redlock (a renewal's fan-out to the nodes).
func schedulerGoroutines() int {
	buf := make([]byte, 16<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	count := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		i := strings.Index(g, "\ncreated by ")
		if i < 0 {
			continue
		}
		by := g[i:]
		if strings.Contains(by, "coordkit/coordkit/luakit/ownership.") || strings.Contains(by, "coordkit/coordkit/redlock.") {
			count++
		}
	}
	return count
}

func testKeepAliveSharedScheduler(t *testing.T, mt matrix.Target) {
	const n = 1000
	matrix.TakeSlot(t)
	e := startEnv(t, mt)
	for _, mk := range manyKinds {
		t.Run(mk.name, func(t *testing.T) {
			if why := mk.needs(e); why != "" {
				t.Skipf("not on this target (%s)", why)
			}
			k := &kind{quorum: mk.quorum}
			hs := mk.take(t, e.clients(t, k, plain), n, 2*time.Second)
			defer func() {
				for _, h := range hs {
					_, _ = h.Release(context.Background())
				}
			}()
			base := schedulerGoroutines()
			cancels := make([]context.CancelFunc, n)
			for i, h := range hs {
				var kctx context.Context
				kctx, cancels[i] = context.WithCancel(context.Background())
				defer cancels[i]()
				require.NoError(t, h.KeepAlive(kctx))
			}
			servers := int64(1)
			if mk.quorum {
				servers = int64(len(e.quorum))
			}
			peak := 0
			// renewed waits until the servers ran want more scripts than in before, sampling the
			// goroutine count, and checks every handle but the skipped one still vouches.
			renewed := func(before map[string]int64, want int64, skip int) {
				t.Helper()
				for end := time.Now().Add(30 * time.Second); renewals(before, e.commands(t)) < want; time.Sleep(10 * time.Millisecond) {
					peak = max(peak, schedulerGoroutines()-base)
					require.False(t, time.Now().After(end), "fewer than %d renewals in 30s", want)
				}
				for i, h := range hs {
					if i != skip {
						require.NoError(t, h.Err(), "handle %d must vouch", i)
					}
				}
			}
			renewed(e.commands(t), 2*n*servers, -1)
			// Each renewal in flight runs on one goroutine; redlock's renewal also sends to its
			// nodes on one goroutine each. A finishing renewal's goroutine and the next one's can
			// be counted at one instant.
			perRenewal := 1
			if mk.quorum {
				perRenewal += len(e.quorum)
			}
			const allowance = 4
			require.LessOrEqual(t, peak, 1+ownership.MaxRenewalsInFlight*perRenewal+allowance,
				"goroutines gained while %d holds keep alive", n)
			t.Logf("%d holds kept alive: at most %d goroutines more than before KeepAlive", n, peak)

			// Stop the keep-alive of handle 0 only.
			cancels[0]()
			// One more round of every other handle: a renewal of handle 0 in flight at the
			// cancellation has completed by then.
			renewed(e.commands(t), int64(n-1)*servers, 0)
			d0 := hs[0].Deadline()
			others := make([]time.Time, n)
			for i, h := range hs {
				others[i] = h.Deadline()
			}
			renewed(e.commands(t), 2*int64(n-1)*servers, 0)
			require.Equal(t, d0, hs[0].Deadline(), "the handle whose KeepAlive ctx ended was renewed")
			for i := 1; i < n; i++ {
				require.True(t, hs[i].Deadline().After(others[i]), "handle %d was not renewed after another's ctx ended", i)
			}
			out, err := hs[0].Release(ctx(t))
			require.NoError(t, err)
			// Released, or NotOwned once its estimate (and the server's hold) ran out: never
			// AlreadyReleased, which would mean the ctx's end released it.
			require.NotEqual(t, ownership.AlreadyReleased, out)
		})
	}
}

// 19. Release while a KeepAlive renewal is in flight (its reply held 500ms by the proxy): Release waits
// for it, removes the hold, and no renewal reaches the server after Release returned.
func testReleaseDuringKeepAlive(t *testing.T, e *env, k *kind) {
	res := "release-keepalive-" + k.name
	ps, cs := e.proxied(t, k, res)
	f := k.newFactory(t, cs, res, factoryOptions{})
	h := mustTry(t, f.try, 1500*time.Millisecond) // renewals due every 500ms
	ps.delay(t, 500*time.Millisecond)
	before := e.commands(t)
	kctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, h.KeepAlive(kctx))
	e.waitScripts(t, before, int64(len(cs)), "the keep-alive's renewal")
	out, err := h.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, ownership.Released, out)
	after := e.commands(t)
	e.requireGone(t, k, res, "after the release")
	time.Sleep(1500 * time.Millisecond) // three renew periods: a renewal still scheduled would run
	require.Zero(t, renewals(after, e.commands(t)), "scripts or renewals ran after Release returned")
	ps.reset(t)
}

// admissionGate is a hook that holds the first "LOCK EXTEND" admission until its ctx ends (Release
// cancels the keep-alive's renewal), then 50ms more, and counts the admissions.
type admissionGate struct {
	entered  chan struct{}
	finished atomic.Bool
	admitted atomic.Int32
}

func (g *admissionGate) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	if op.Name == "LOCK EXTEND" && g.admitted.Add(1) == 1 {
		close(g.entered)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		g.finished.Store(true)
	}
	return ctx, func(luakit.HookOutcome, error) {}, nil
}

// TestReleaseDuringKeepAliveAdmission: Release called while a keep-alive renewal is still in its hook
// admission (not yet holding the handle's operation slot) waits for that renewal to finish, and
// nothing is admitted or run on the server after Release returned: the lease key stays gone.
func TestReleaseDuringKeepAliveAdmission(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		g := &admissionGate{entered: make(chan struct{})}
		l, err := lock.New(e.clients(t, kinds[0], plain)[0], lock.WithHooks(g))
		require.NoError(t, err)
		name := lockName("admission")
		le, err := l.TryAcquire(ctx(t), name, 1500*time.Millisecond)
		require.NoError(t, err)
		require.NoError(t, le.KeepAlive(context.Background()))
		<-g.entered
		_, err = le.Release(ctx(t))
		require.NoError(t, err)
		require.True(t, g.finished.Load(), "Release returned while the keep-alive's renewal was in its admission")
		admitted, after := g.admitted.Load(), e.commands(t)
		time.Sleep(1500 * time.Millisecond) // three renew periods
		require.Equal(t, admitted, g.admitted.Load(), "operations admitted after Release returned")
		require.Zero(t, renewals(after, e.commands(t)), "scripts or renewals ran after Release returned")
		require.Equal(t, int64(-2), matrix.PTTL(t, e.Raw, lockKey("admission")), "the lease key after the release")
	})
}
