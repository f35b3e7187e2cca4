package leader_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// TestLeaderTermCallbacks checks, on every target, how terms, their callbacks, shutdown and observers
// meet: the caller's client is never closed, a revoked term overlaps a draining one, callbacks finish
// before the next campaign, a shutdown deadline abandons a callback, a pending OnElected holds the
// term, observers see every change, the key prefix reaches the server, and a spent recovery budget
// is terminal. Each fails when its behaviour is removed (the commit that added them records the drop
// watched failing). The last one kills and restarts the server (node).
func TestLeaderTermCallbacks(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		t.Run("client_stays_the_callers", func(t *testing.T) { testClientStays(t, e) })
		t.Run("revoked_overlaps_draining_elected", func(t *testing.T) { testRevokedOverlaps(t, e) })
		t.Run("callbacks_finish_before_next_campaign", func(t *testing.T) { testCallbacksFinishFirst(t, e) })
		t.Run("shutdown_deadline_abandons_callback_renewal_stops", func(t *testing.T) { testShutdownAbandons(t, e) })
		t.Run("pending_elected_holds_the_term", func(t *testing.T) { testPendingHolds(t, e) })
		t.Run("observers_see_every_change", func(t *testing.T) { testObserversSeeAll(t, e) })
		t.Run("key_prefix_on_the_server", func(t *testing.T) { testLeaderPrefix(t, e) })
		t.Run("recovery_budget_is_terminal", func(t *testing.T) { testRecoveryBudget(t, e) })
	})
}

// newElection returns an election over a new client of the target (closed at t.Cleanup) with the
// suite's short timings and opts.
func newElection(t *testing.T, e *env, c rueidis.Client, name string, opts ...leader.Option) *leader.Election {
	t.Helper()
	if c == nil {
		c, _ = e.trackedClient(t)
	}
	el, err := leader.New(c, name, append([]leader.Option{
		leader.WithLeaseDuration(leaseDuration),
		leader.WithSafetyMargin(safetyMargin),
		leader.WithRetryDelay(retryDelay),
	}, opts...)...)
	require.NoError(t, err)
	return el
}

// testClientStays: neither Run ending with its ctx nor Stop closes the caller's client.
func testClientStays(t *testing.T, e *env) {
	c, _ := e.trackedClient(t)
	elected := make(chan struct{}, 4)
	el := newElection(t, e, c, "ck:leader:client", leader.OnElected(func(ctx context.Context, _ leader.Term) error {
		elected <- struct{}{}
		<-ctx.Done()
		return nil
	}))
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(rctx) }()
	<-elected
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, c.Do(ctx(t), c.B().Ping().Build()).Error(), "Run ending must not close the client")

	require.NoError(t, el.Start(context.Background()))
	<-elected
	require.NoError(t, el.Stop(ctx(t)))
	require.NoError(t, c.Do(ctx(t), c.B().Ping().Build()).Error(), "Stop must not close the client")
	_, leaseKey, _ := election("client")
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "released")
}

// testRevokedOverlaps: OnRevoked starts while OnElected is still draining (the elected callback waits
// for it before returning).
func testRevokedOverlaps(t *testing.T, e *env) {
	revokedStarted := make(chan struct{})
	var overlapped atomic.Bool
	el := newElection(t, e, nil, "ck:leader:overlap",
		leader.OnElected(func(ctx context.Context, _ leader.Term) error {
			<-ctx.Done()
			select { // drain: wait for OnRevoked to start, bounded so a regression fails instead of hanging
			case <-revokedStarted:
				overlapped.Store(true)
			case <-time.After(3 * time.Second):
			}
			return nil
		}),
		leader.OnRevoked(func(leader.Term) { close(revokedStarted) }))
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { _, ok := el.Current(); return ok }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, el.Stop(ctx(t)))
	require.True(t, overlapped.Load(), "OnRevoked must run while OnElected drains")
}

// testCallbacksFinishFirst: a leader that relinquishes at once campaigns again only after both callbacks
// of its term returned: no OnElected starts while an OnRevoked (which takes a while) still runs, and the
// next term does come.
func testCallbacksFinishFirst(t *testing.T, e *env) {
	var revoking, violated atomic.Bool
	var terms atomic.Int64
	el := newElection(t, e, nil, "ck:leader:finish",
		leader.OnElected(func(ctx context.Context, _ leader.Term) error {
			if revoking.Load() {
				violated.Store(true)
			}
			terms.Add(1)
			return nil // relinquish
		}),
		leader.OnRevoked(func(leader.Term) {
			revoking.Store(true)
			time.Sleep(3 * retryDelay) // longer than the retry delay before the next campaign
			revoking.Store(false)
		}))
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { return terms.Load() >= 4 }, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, el.Stop(ctx(t)))
	require.False(t, violated.Load(), "an OnElected started while the previous term's OnRevoked ran")
}

// testShutdownAbandons: Stop's deadline stops waiting for an elected callback that ignores its context,
// and renewal stops anyway: the server lease expires while the callback still runs. The release follows
// once the callback returns.
func testShutdownAbandons(t *testing.T, e *env) {
	_, leaseKey, _ := election("abandon")
	release := make(chan struct{})
	returned := make(chan struct{})
	el := newElection(t, e, nil, "ck:leader:abandon", leader.OnElected(func(context.Context, leader.Term) error {
		defer close(returned)
		<-release // ignores its context
		return nil
	}))
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { _, ok := el.Current(); return ok }, 10*time.Second, 5*time.Millisecond)
	sctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	err := el.Stop(sctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "Stop's deadline abandons the callback")
	_, ok := el.Current()
	require.False(t, ok, "the term is revoked")
	require.Eventually(t, func() bool { return e.PTTL(t, leaseKey) == -2 }, leaseDuration+slack, 10*time.Millisecond,
		"renewal stops: the server lease expires while the callback still runs")
	select {
	case <-returned:
		t.Fatal("the callback must still be running")
	default:
	}
	close(release)
	require.NoError(t, el.Stop(ctx(t)))
}

// testPendingHolds: an elected callback that stays pending holds the term: over three lease durations
// the lease is renewed (one token, lease present) and Current stays set.
func testPendingHolds(t *testing.T, e *env) {
	_, leaseKey, fenceKey := election("pending")
	var calls atomic.Int64
	el := newElection(t, e, nil, "ck:leader:pending", leader.OnElected(func(ctx context.Context, _ leader.Term) error {
		calls.Add(1)
		<-ctx.Done()
		return nil
	}))
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { _, ok := el.Current(); return ok }, 10*time.Second, 5*time.Millisecond)
	term, _ := el.Current()
	time.Sleep(3 * leaseDuration) // the span the term must survive; the assertions are on server state
	now, ok := el.Current()
	require.True(t, ok, "still leader")
	require.Equal(t, term.FencingToken, now.FencingToken, "same term")
	require.Greater(t, e.PTTL(t, leaseKey), int64(0), "the lease is renewed")
	require.Equal(t, term.FencingToken, e.counter(t, fenceKey), "no new acquisition")
	require.EqualValues(t, 1, calls.Load())
	require.NoError(t, el.Stop(ctx(t)))
}

// testObserversSeeAll: every election and every revocation is reported to every observer, in order,
// for terms that end by relinquishing, by shutdown, and with a panicking observer beside them.
func testObserversSeeAll(t *testing.T, e *env) {
	var mu sync.Mutex
	var changes []leader.Change
	var elected []int64
	el := newElection(t, e, nil, "ck:leader:observers",
		leader.OnElected(func(ctx context.Context, term leader.Term) error {
			mu.Lock()
			elected = append(elected, term.FencingToken)
			n := len(elected)
			mu.Unlock()
			if n < 5 {
				return nil // relinquish: a new term follows
			}
			<-ctx.Done()
			return nil
		}),
		leader.OnChange(func(leader.Change) { panic("observer panics are isolated") }),
		leader.OnChange(func(c leader.Change) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		}))
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(elected) >= 5 }, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, el.Stop(ctx(t)))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, changes, 2*len(elected), "one Elected and one Revoked per term")
	for i, tok := range elected {
		require.Equal(t, leader.Elected, changes[2*i].State, "change %d", 2*i)
		require.Equal(t, tok, changes[2*i].Term.FencingToken)
		require.Equal(t, leader.Revoked, changes[2*i+1].State, "change %d", 2*i+1)
		require.Equal(t, tok, changes[2*i+1].Term.FencingToken)
		if i < len(elected)-1 {
			require.ErrorIs(t, changes[2*i+1].Cause, leader.ErrReleased)
		} else {
			require.ErrorIs(t, changes[2*i+1].Cause, context.Canceled, "the last term ends with Stop")
		}
	}
}

// testLeaderPrefix: WithKeyPrefix is applied on the server: the lease and fence keys exist under the
// prefix, nothing at the unprefixed keys.
func testLeaderPrefix(t *testing.T, e *env) {
	const prefix = "ck:pfx\x00:"
	name := "ck:leader:prefix"
	leaseKey, fenceKey := lock.Keys(name)
	el := newElection(t, e, nil, name, leader.WithKeyPrefix(prefix))
	require.Equal(t, leaseKey, el.LeaseKey(), "LeaseKey is documented without the prefix")
	require.Equal(t, fenceKey, el.FenceKey())
	require.NoError(t, el.Start(context.Background()))
	require.Eventually(t, func() bool { _, ok := el.Current(); return ok }, 10*time.Second, 5*time.Millisecond)
	term, _ := el.Current()
	p := e.PTTL(t, prefix+leaseKey)
	require.True(t, p > 0 && p <= leaseDuration.Milliseconds(), "prefixed lease PTTL %d", p)
	require.Equal(t, term.FencingToken, e.counter(t, prefix+fenceKey), "prefixed fence counter")
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "nothing at the unprefixed lease key")
	require.EqualValues(t, -2, e.PTTL(t, fenceKey), "nothing at the unprefixed fence key")
	require.NoError(t, el.Stop(ctx(t)))
	require.EqualValues(t, -2, e.PTTL(t, prefix+leaseKey), "released")
}

// testRecoveryBudget: while the server (on Cluster: the election's primary) is down, campaigning is
// retried for the connection-recovery budget and then Run ends with ErrRecoveryExhausted; a budget
// longer than the outage keeps campaigning and elects once the server is back.
func testRecoveryBudget(t *testing.T, e *env) {
	name := "ck:leader:budget"
	leaseKey, _ := lock.Keys(name)
	node := e.Srv
	if e.IsCluster() {
		var err error
		node, err = e.Cluster.PrimaryOf(ctx(t), int(luakit.Slot(leaseKey)))
		require.NoError(t, err)
	}
	short := newElection(t, e, nil, name, leader.WithRecoveryBudget(time.Second))
	long := newElection(t, e, nil, name, leader.WithRecoveryBudget(time.Hour))
	node.MustKill(t)
	restarted := false
	defer func() {
		if !restarted {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = node.Restart(rctx)
		}
	}()
	shortDone := make(chan error, 1)
	go func() { shortDone <- short.Run(context.Background()) }()
	require.NoError(t, long.Start(context.Background()))

	select {
	case err := <-shortDone:
		require.ErrorIs(t, err, leader.ErrRecoveryExhausted)
		require.False(t, errors.Is(err, context.Canceled))
		t.Logf("exhausted budget on %s: %v", e.Name, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run kept campaigning past its recovery budget")
	}
	select {
	case <-long.Stopped():
		t.Fatal("a budget longer than the outage must keep campaigning")
	default:
	}
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, node.Restart(rctx))
	restarted = true
	matrix.WaitServing(t, e.Raw)
	require.Eventually(t, func() bool { _, ok := long.Current(); return ok }, 30*time.Second, 10*time.Millisecond,
		"the long-budget candidate is elected once the server is back")
	require.NoError(t, long.Stop(ctx(t)))
}
