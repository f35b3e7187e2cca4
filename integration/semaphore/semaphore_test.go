package semaphore_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/semaphore"
)

// scenario is one behaviour of issue 4 (semaphore), checked on every target; each asserts the server
// state it leaves through the env's raw client.
type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_contention", Run: testContention},
	{Name: "02_expiry_handoff", Run: testExpiryHandoff},
	{Name: "03_no_expiry", Run: testNoExpiry},
	{Name: "04_capacity_mismatch_adopt_lower", Run: testCapacity},
	{Name: "05_owner_isolation", Run: testOwnerIsolation},
	{Name: "06_extend_lost_or_refused", Run: testExtendLostOrRefused},
	{Name: "07_verify", Run: testVerify},
	{Name: "08_release_outcomes", Run: testReleaseOutcomes},
	{Name: "09_prefix_binary_keys", Run: testPrefixBinaryKeys},
	{Name: "10_bad_input", Run: testBadInput},
	{Name: "11_noscript_recovery", Run: testNoscript},
	{Name: "12_acquire_woken_by_release", Run: testAcquireWokenByRelease},
	{Name: "13_acquire_woken_by_expiry", Run: testAcquireWokenByExpiry},
	{Name: "14_acquire_ctx_ends_wait", Run: testAcquireCtxEndsWait},
	{Name: "15_acquire_does_not_poll", Run: testAcquireDoesNotPoll},
	{Name: "16_acquire_Concurrent", Run: testAcquireConcurrent},
	{Name: "18_weighted_permits", Run: testWeightedPermits},
	{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
	{Name: "91_refused_acquire_sends_no_cleanup", Run: testRefusedAcquireNoCleanup},
	{Name: "17_abandoned_cleanup_metric", Run: testAbandonedMetric, StandaloneOnly: true}, // kills a standalone server: keep it last
}

// TestSemaphore runs every scenario on every target. Targets run in parallel (at most
// matrix.MaxParallelTargets at once), each with its own server or cluster; the scenarios of one target run in
// order on it.
func TestSemaphore(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}

// 1. Goroutines on two clients contend for 3 permits with a long TTL: at most 3 holders at every
// instant (an atomic counter checked by each new holder) and ZCARD never above capacity + 1 (the
// capacity member), sampled throughout. Every permit is released and the key ends absent.
func testContention(t *testing.T, e *env) {
	const (
		capacity = 3
		workers  = 8
		rounds   = 15
		key      = "ck:sem:contention"
	)
	sems := []*semaphore.Semaphore{
		newSem(t, e.NewClient(t, nil, matrix.NoCache), key, capacity),
		newSem(t, e.NewClient(t, nil, matrix.NoCache), key, capacity),
	}
	var holders, maxHolders, acquired atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan int64, 1)
	go func() { // sample ZCARD while the workers run
		var worst int64
		for {
			select {
			case <-stop:
				sampled <- worst
				return
			default:
			}
			n, err := e.Raw.Do(context.Background(), e.Raw.B().Zcard().Key(key).Build()).AsInt64()
			if err == nil && n > worst {
				worst = n
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := sems[w%2]
			for range rounds {
				p, err := s.TryAcquire(context.Background(), 30*time.Second)
				if errors.Is(err, semaphore.ErrNotAcquired) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				acquired.Add(1)
				n := holders.Add(1)
				for {
					m := maxHolders.Load()
					if n <= m || maxHolders.CompareAndSwap(m, n) {
						break
					}
				}
				if n > capacity {
					errs <- errors.New("more holders than the capacity: " + strconv.FormatInt(n, 10))
				}
				time.Sleep(2 * time.Millisecond)
				holders.Add(-1)
				out, err := p.Release(context.Background())
				if err != nil || out != semaphore.Released {
					errs <- errors.Join(errors.New("release "+out.String()), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	worst := <-sampled
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d acquisitions, max %d holders, max ZCARD %d", acquired.Load(), maxHolders.Load(), worst)
	require.Greater(t, acquired.Load(), int64(workers), "the workers must have acquired permits")
	require.LessOrEqual(t, maxHolders.Load(), int64(capacity))
	require.LessOrEqual(t, worst, int64(capacity+1), "ZCARD (permits + capacity member) above capacity")
	e.requireAbsent(t, key, "semaphore key after every release")
}

// 2. Permits that are never released expire on the server and free their capacity within TTL + slack;
// the key vanishes on its own once the last permit expired.
func testExpiryHandoff(t *testing.T, e *env) {
	const key = "ck:sem:handoff"
	const ttl = 400 * time.Millisecond
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2)
	c := ctx(t)
	start := time.Now()
	a, err := s.TryAcquire(c, ttl)
	require.NoError(t, err)
	b, err := s.TryAcquire(c, ttl)
	require.NoError(t, err)
	e.requirePermit(t, key, a, false)
	e.requirePermit(t, key, b, false)
	require.EqualValues(t, 3, e.zcard(t, key))
	_, err = s.TryAcquire(c, ttl)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired)
	require.EqualValues(t, 2, e.permits(t, key), "a refused acquisition writes no permit")

	var next *semaphore.Permit
	for {
		next, err = s.TryAcquire(c, 10*time.Second)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, semaphore.ErrNotAcquired)
		require.Less(t, time.Since(start), ttl+time.Second, "expired permits did not free capacity")
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	t.Logf("capacity freed after %v (ttl %v)", elapsed, ttl)
	require.GreaterOrEqual(t, elapsed, ttl-50*time.Millisecond, "a permit freed before its TTL")
	// The local estimate, measured from before the request was sent, elapsed before the server's.
	require.Zero(t, a.Remaining())
	select {
	case <-a.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed after the local estimate elapsed")
	}
	require.ErrorIs(t, a.Err(), semaphore.ErrExpired)
	// Pruning removed the expired permit when the new one was acquired (b, acquired a moment after a,
	// may still be active).
	require.NotContains(t, e.members(t, key), a.OwnerToken())
	e.requirePermit(t, key, next, false)
	release(t, next, semaphore.Released)
	// b, acquired a moment after a, may outlive the release by a few ms; the key expires with it.
	e.requireGone(t, key, time.Second, "key after the last release and b's expiry")

	// Never released and never touched again: the key expires with its last permit.
	_, err = s.TryAcquire(c, 200*time.Millisecond)
	require.NoError(t, err)
	require.Greater(t, e.PTTL(t, key), int64(0))
	time.Sleep(400 * time.Millisecond)
	e.requireAbsent(t, key, "key after its last permit expired")
	require.NoError(t, b.Close()) // expired: the release finds nothing
}

// 3. A permit without expiry lasts until released: scored +inf, the key persistent; renewing it to a
// finite TTL gives the key an expiry again.
func testNoExpiry(t *testing.T, e *env) {
	const key = "ck:sem:noexpiry"
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2)
	c := ctx(t)
	p, err := s.TryAcquireNoExpiry(c)
	require.NoError(t, err)
	require.True(t, p.NoExpiry())
	require.Equal(t, semaphore.Forever, p.Remaining())
	require.True(t, p.Deadline().IsZero())
	q, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requirePermit(t, key, p, true)
	time.Sleep(300 * time.Millisecond)
	ok, err := p.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.Nil(t, p.Err())

	// A finite expiry for it: the key gets an expiry again (its latest permit is q's minute).
	ok, err = p.ExtendTTL(c, 30*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	e.requirePermit(t, key, p, false)
	require.Greater(t, e.PTTL(t, key), int64(50_000), "key expiry follows the latest permit")
	require.LessOrEqual(t, p.Remaining(), 30*time.Second)
	// And back to no expiry.
	ok, err = p.ExtendNoExpiry(c)
	require.NoError(t, err)
	require.True(t, ok)
	e.requirePermit(t, key, p, true)
	require.Equal(t, semaphore.Forever, p.Remaining())
	// A TTL of 0 is invalid, never "no expiry": nothing is sent.
	_, err = s.TryAcquire(c, 0)
	require.ErrorIs(t, err, semaphore.ErrInvalidTTL)
	ok, err = p.ExtendTTL(c, 0)
	require.ErrorIs(t, err, semaphore.ErrInvalidTTL)
	require.False(t, ok)
	require.True(t, p.NoExpiry())

	release(t, q, semaphore.Released)
	e.requirePermit(t, key, p, true)
	release(t, p, semaphore.Released)
	e.requireAbsent(t, key, "key after releasing the non-expiring permit")
}

// 4. A different capacity while permits are active is ErrCapacityMismatch and writes nothing; with no
// active permit the new capacity is adopted; more active permits than the stored capacity are never
// revoked, and new acquisitions fail until the count is below it.
func testCapacity(t *testing.T, e *env) {
	const key = "ck:sem:capacity"
	c := ctx(t)
	s3 := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 3)
	s2 := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2)
	a, err := s3.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	b, err := s3.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requireCapacity(t, key, 3)
	before := e.members(t, key)

	_, err = s2.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrCapacityMismatch)
	var cm *semaphore.CapacityMismatchError
	require.ErrorAs(t, err, &cm)
	require.Equal(t, int64(3), cm.Stored)
	require.Equal(t, int64(2), cm.Requested)
	require.Equal(t, before, e.members(t, key), "a capacity mismatch writes nothing")

	// Drain, then the new capacity is adopted.
	release(t, a, semaphore.Released)
	release(t, b, semaphore.Released)
	e.requireAbsent(t, key, "key after draining")
	x, err := s2.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requireCapacity(t, key, 2)
	y, err := s2.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	_, err = s2.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired)
	_, err = s3.TryAcquire(c, time.Minute)
	require.ErrorAs(t, err, &cm)
	require.Equal(t, int64(2), cm.Stored)

	// Lower the stored capacity under the holders (as a failover or a hand edit could): nobody is
	// revoked, holders keep renewing, and acquisition fails until the count is below capacity 1.
	e.do(t, "ZADD", key, "-1", "#capacity")
	s1 := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 1)
	_, err = s1.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired)
	for _, p := range []*semaphore.Permit{x, y} {
		ok, err := p.Verify(c)
		require.NoError(t, err)
		require.True(t, ok, "lowering the capacity must not revoke a permit")
		ok, err = p.Extend(c)
		require.NoError(t, err)
		require.True(t, ok, "renewal never checks the capacity")
	}
	require.EqualValues(t, 2, e.permits(t, key))
	release(t, x, semaphore.Released)
	_, err = s1.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired, "one holder at capacity 1")
	release(t, y, semaphore.Released)
	z, err := s1.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requireCapacity(t, key, 1)
	release(t, z, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 5. An owner whose permit expired cannot renew, verify or release the permit that replaced it. The
// server-side expiry is forced (score moved into the past) so the old handle still believes it holds
// the permit and really sends its Extend.
func testOwnerIsolation(t *testing.T, e *env) {
	const key = "ck:sem:isolation"
	c := ctx(t)
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 1)
	old, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.do(t, "ZADD", key, "XX", "1", old.OwnerToken()) // expired on the server
	repl, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err, "the expired permit must be pruned and replaced")
	before := e.members(t, key)
	require.NotContains(t, before, old.OwnerToken())

	ok, err := old.ExtendTTL(c, time.Hour)
	require.NoError(t, err)
	require.False(t, ok, "an expired owner must not renew")
	require.ErrorIs(t, old.Err(), semaphore.ErrLost)
	ok, err = old.Verify(c)
	require.NoError(t, err)
	require.False(t, ok)
	release(t, old, semaphore.NotOwned)
	require.Equal(t, before, e.members(t, key), "the replacement must be untouched")
	e.requirePermit(t, key, repl, false)

	// Natural expiry too: a short permit expires, another owner takes the slot, and the old handle's
	// release leaves it intact.
	release(t, repl, semaphore.Released)
	short, err := s.TryAcquire(c, 150*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	repl, err = s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	ok, err = short.Extend(c) // local estimate elapsed: false, no I/O
	require.NoError(t, err)
	require.False(t, ok)
	release(t, short, semaphore.NotOwned)
	e.requirePermit(t, key, repl, false)
	require.EqualValues(t, 1, e.permits(t, key))
	release(t, repl, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 6. Extend finds the permit gone (the key deleted externally): false, and the handle ends with
// ErrLost; Extend must not recreate the permit. Extend refused by the server (the key replaced by a
// string: WRONGTYPE, terminal): the error is returned and the handle is unchanged, nothing else is sent
// (no cleanup, nothing abandoned); the Release that follows fails the same way and ends the handle.
func testExtendLostOrRefused(t *testing.T, e *env) {
	const key = "ck:sem:extend-refused"
	c := ctx(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2, semaphore.WithMeterProvider(mp),
		semaphore.WithLogger(slog.New(slog.DiscardHandler)))

	lost, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.do(t, "DEL", key)
	ok, err := lost.Extend(c)
	require.NoError(t, err)
	require.False(t, ok)
	require.ErrorIs(t, lost.Err(), semaphore.ErrLost)
	e.requireAbsent(t, key, "Extend must not recreate a deleted permit")

	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	deadline := p.Deadline()
	e.do(t, "DEL", key)
	e.do(t, "SET", key, "not a sorted set")
	st := sumEval(e.CommandStats(t))
	ok, err = p.ExtendTTL(c, 2*time.Minute)
	require.Error(t, err)
	require.False(t, ok)
	require.True(t, luakit.IsTerminal(err), "WRONGTYPE is terminal: %v", err)
	require.NotErrorIs(t, err, semaphore.ErrUncertain)
	require.Nil(t, p.Err(), "a refused renewal leaves the handle unchanged")
	require.Equal(t, deadline, p.Deadline())
	require.Equal(t, time.Minute, p.TTL())
	require.Equal(t, st+1, sumEval(e.CommandStats(t)), "the renewal only: no cleanup")
	_, err = p.Release(c)
	require.True(t, luakit.IsTerminal(err), "WRONGTYPE is terminal: %v", err)
	require.ErrorIs(t, p.Err(), semaphore.ErrReleased)
	require.Empty(t, abandoned(t, reader), "nothing was retried or abandoned")
	e.do(t, "DEL", key)
	e.requireAbsent(t, key, "key at the end")
}

// 7. Verify: true while held; false once the permit is gone (the handle ends with ErrLost); a failed
// Verify (cancelled ctx) leaves the permit held.
func testVerify(t *testing.T, e *env) {
	const key = "ck:sem:verify"
	c := ctx(t)
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2)
	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	ok, err := p.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)

	cctx, cancel := context.WithCancel(c)
	cancel()
	ok, err = p.Verify(cctx)
	require.Error(t, err)
	require.False(t, ok)
	require.Nil(t, p.Err(), "a failed Verify leaves the permit held")
	e.requirePermit(t, key, p, false)
	ok, err = p.Verify(c)
	require.NoError(t, err)
	require.True(t, ok, "retrying Verify")

	// Verify prunes: an expired permit of another owner is removed by it.
	q, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.do(t, "ZADD", key, "XX", "1", q.OwnerToken())
	ok, err = p.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	require.NotContains(t, e.members(t, key), q.OwnerToken(), "Verify prunes expired permits")
	require.NoError(t, q.Close())

	e.do(t, "ZREM", key, p.OwnerToken())
	ok, err = p.Verify(c)
	require.NoError(t, err)
	require.False(t, ok)
	require.ErrorIs(t, p.Err(), semaphore.ErrLost)
	e.requireAbsent(t, key, "key once no permit is left")
}

// 8. Release outcomes: Released, then AlreadyReleased without I/O; NotOwned for an expired permit;
// Close after a confirmed release does nothing; Close releases.
func testReleaseOutcomes(t *testing.T, e *env) {
	const key = "ck:sem:release"
	c := ctx(t)
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 3)
	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	release(t, p, semaphore.Released)
	require.ErrorIs(t, p.Err(), semaphore.ErrReleased)
	st := e.CommandStats(t)
	release(t, p, semaphore.AlreadyReleased)
	require.NoError(t, p.Close())
	require.Equal(t, st["evalsha"]+st["eval"], sumEval(e.CommandStats(t)), "no I/O after a confirmed release")
	e.requireAbsent(t, key, "key after release")

	short, err := s.TryAcquire(c, 100*time.Millisecond)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	release(t, short, semaphore.NotOwned)

	q, err := s.TryAcquireNoExpiry(c)
	require.NoError(t, err)
	keep, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	require.NoError(t, q.Close())
	require.NotContains(t, e.members(t, key), q.OwnerToken(), "Close released the permit")
	e.requirePermit(t, key, keep, false)
	release(t, keep, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

func sumEval(st map[string]int64) int64 { return st["evalsha"] + st["eval"] }

// 9. Binary keys and a binary prefix: the physical key is prefix+key, byte for byte.
func testPrefixBinaryKeys(t *testing.T, e *env) {
	const key = "\x00\xffck:sem:{bin}\r\n"
	const prefix = "p\x00\xfe:"
	c := ctx(t)
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2, semaphore.WithKeyPrefix(prefix))
	require.Equal(t, key, s.Key())
	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requirePermit(t, prefix+key, p, false)
	e.requireCapacity(t, prefix+key, 2)
	e.requireAbsent(t, key, "unprefixed key")
	ok, err := p.ExtendTTL(c, 2*time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	release(t, p, semaphore.Released)
	e.requireAbsent(t, prefix+key, "prefixed key after release")
}

// 10. Bad input fails before any I/O and writes nothing.
func testBadInput(t *testing.T, e *env) {
	const key = "ck:sem:bad"
	c := ctx(t)
	client := e.NewClient(t, nil, matrix.NoCache)
	_, err := semaphore.New(nil, key, 1)
	require.ErrorIs(t, err, semaphore.ErrNilClient)
	_, err = semaphore.New(client, "", 1)
	require.ErrorIs(t, err, luakit.ErrEmptyKey)
	for _, capacity := range []int64{0, -1} {
		_, err = semaphore.New(client, key, capacity)
		require.ErrorIs(t, err, semaphore.ErrInvalidCapacity)
	}
	_, err = semaphore.New(client, key, 1, semaphore.WithCleanupTimeout(0))
	require.Error(t, err)

	before := sumEval(e.CommandStats(t))
	s := newSem(t, client, key, 1)
	for _, ttl := range []time.Duration{time.Nanosecond, 999 * time.Microsecond, -time.Second} {
		_, err = s.TryAcquire(c, ttl)
		require.ErrorIs(t, err, semaphore.ErrInvalidTTL, "ttl %v", ttl)
	}
	require.Equal(t, before, sumEval(e.CommandStats(t)), "bad input must not reach the server")
	e.requireAbsent(t, key, "key after bad input")

	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	st := sumEval(e.CommandStats(t))
	ok, err := p.ExtendTTL(c, 500*time.Microsecond)
	require.ErrorIs(t, err, semaphore.ErrInvalidTTL)
	require.False(t, ok)
	require.Nil(t, p.Err(), "an invalid ExtendTTL changes nothing")
	require.Equal(t, time.Minute, p.TTL())
	require.Equal(t, st, sumEval(e.CommandStats(t)), "an invalid ExtendTTL must not reach the server")
	e.requirePermit(t, key, p, false)
	release(t, p, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}

// 11. After SCRIPT FLUSH, EVALSHA answers NOSCRIPT and the EVAL fallback runs every script.
func testNoscript(t *testing.T, e *env) {
	const key = "ck:sem:noscript"
	c := ctx(t)
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 1)
	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	flush := func() {
		for _, n := range e.Nodes {
			_, err := n.Do(c, "SCRIPT", "FLUSH")
			require.NoError(t, err)
		}
	}
	evals := e.CommandStats(t)["eval"]
	flush()
	ok, err := p.Extend(c)
	require.NoError(t, err)
	require.True(t, ok)
	flush()
	ok, err = p.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)
	flush()
	release(t, p, semaphore.Released)
	flush()
	p, err = s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requirePermit(t, key, p, false)
	release(t, p, semaphore.Released)
	require.GreaterOrEqual(t, e.CommandStats(t)["eval"]-evals, int64(4), "EVAL fallback after each NOSCRIPT")
	e.requireAbsent(t, key, "key at the end")
}

// 17. With the server killed, Close waits about the cleanup timeout and returns that attempt's error,
// retries in the background for the retry window, then abandons the cleanup: the counter coordkit.coordination.cleanup.abandoned gets
// stage=close and the error's class as reason. Standalone targets only (it kills the server).
func testAbandonedMetric(t *testing.T, e *env) {
	const key = "ck:sem:abandoned"
	c := ctx(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := newSem(t, e.NewClient(t, nil, matrix.NoCache), key, 2,
		semaphore.WithMeterProvider(mp),
		semaphore.WithCleanupTimeout(200*time.Millisecond),
		semaphore.WithCleanupRetryWindow(time.Second),
		semaphore.WithLogger(slog.New(slog.DiscardHandler)))
	p, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err)
	e.requirePermit(t, key, p, false)

	e.Srv.MustKill(t)
	start := time.Now()
	require.Error(t, p.Close(), "Close returns its first attempt's error: the server is gone")
	require.Less(t, time.Since(start), 2*time.Second, "Close waits about the cleanup timeout")
	require.ErrorIs(t, p.Err(), semaphore.ErrReleased)
	require.Empty(t, abandoned(t, reader), "nothing abandoned before the retry window ends")

	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(sctx), "retries end by themselves after the window")
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	got := abandoned(t, reader)
	var total int64
	for set, v := range got {
		stage, _ := set.Value("stage")
		reason, _ := set.Value("reason")
		t.Logf("abandoned stage=%s reason=%s: %d", stage.AsString(), reason.AsString(), v)
		require.Equal(t, "close", stage.AsString())
		require.NotEqual(t, "closed", reason.AsString())
		total += v
	}
	require.Equal(t, int64(1), total)
	_, err = s.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrClosed)
}

// abandoned returns the abandoned-cleanup counter's points by attribute set.
func abandoned(t *testing.T, r *sdkmetric.ManualReader) map[attribute.Set]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[attribute.Set]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != semaphore.MetricCleanupAbandoned {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%T", m.Data)
			for _, dp := range sum.DataPoints {
				out[dp.Attributes] += dp.Value
			}
		}
	}
	return out
}
