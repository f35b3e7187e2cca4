package rwlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/rwlock"
)

// env is one running target shared by the scenarios of that target. Scenarios run one after another on
// it, each on its own keys.
type env struct {
	*matrix.Env
}

func startEnv(t *testing.T, st matrix.Target) *env {
	t.Helper()
	return &env{Env: matrix.StartEnv(t, st)}
}

// locker returns a Locker over a new client of its own.
func (e *env) locker(t *testing.T, opts ...rwlock.Option) *rwlock.Locker {
	t.Helper()
	l, err := rwlock.New(e.NewClient(t, nil), opts...)
	require.NoError(t, err)
	return l
}

// trackedLocker returns a Locker over a new client built by luakit.NewTrackedClient, so its waiting
// acquisitions wake on invalidations with no option (the Locker finds the tracker itself).
func (e *env) trackedLocker(t *testing.T, opts ...rwlock.Option) *rwlock.Locker {
	t.Helper()
	l, err := rwlock.New(e.NewClient(t, luakit.NewTracker()), opts...)
	require.NoError(t, err)
	return l
}

// acquired is the result of an asynchronous acquisition.
type acquired struct {
	lease *rwlock.Lease
	err   error
	at    time.Time
}

// acquireAsync runs acquire(c, key, ttl) in a goroutine and delivers its result.
func acquireAsync(c context.Context, acquire func(context.Context, string, time.Duration) (*rwlock.Lease, error),
	key string, ttl time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		lease, err := acquire(c, key, ttl)
		ch <- acquired{lease, err, time.Now()}
	}()
	return ch
}

// await returns the result of ch, failing t after limit.
func await(t *testing.T, ch <-chan acquired, limit time.Duration) acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("the acquisition did not return within %v", limit)
		return acquired{}
	}
}

// requirePending asserts that the acquisition behind ch has not returned.
func requirePending(t *testing.T, ch <-chan acquired) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("the waiting acquisition returned early: %v, %v", r.lease, r.err)
	default:
	}
}

// waitArmed waits until the server ran a PTTL since the commandstats snapshot before (a waiter armed
// tracking with its cached PTTL read; nothing else in these scenarios sends PTTL while a waiter arms)
// and then ran nothing for 50 ms (the attempt that follows the arming read is done: the waiter
// sleeps). It returns a snapshot taken once the waiter is asleep.
func (e *env) waitArmed(t *testing.T, before map[string]int64) map[string]int64 {
	t.Helper()
	eventually(t, 5*time.Second, "the waiter to arm tracking", func() bool {
		return e.CommandStats(t)["pttl"] > before["pttl"]
	})
	return e.WaitQuiet(t, 50*time.Millisecond, 5*time.Second)
}

// Raw server state, read through the assertion client.

// requireAbsent asserts that key does not exist on the server.
func (e *env) requireAbsent(t *testing.T, key string) {
	t.Helper()
	require.EqualValues(t, -2, e.PTTL(t, key), "lock key must be absent")
}

// entries returns the members of the lock key's sorted set with their scores (expiry, server ms).
func (e *env) entries(t *testing.T, key string) map[string]int64 {
	t.Helper()
	zs, err := e.Raw.Do(ctx(t), e.Raw.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	out := map[string]int64{}
	for _, z := range zs {
		out[z.Member] = int64(z.Score)
	}
	return out
}

// serverMillis returns the server's clock in ms (the node serving key).
func (e *env) serverMillis(t *testing.T) int64 {
	t.Helper()
	arr, err := e.Nodes[0].Do(ctx(t), "TIME")
	require.NoError(t, err)
	parts, err := arr.ToArray()
	require.NoError(t, err)
	s, err := parts[0].ToString()
	require.NoError(t, err)
	us, err := parts[1].ToString()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(s, 10, 64)
	micro, _ := strconv.ParseInt(us, 10, 64)
	return sec*1000 + micro/1000
}

// requireEntries asserts the exact holder entries of key (by lease), each unexpired, and that the key's
// expiry follows its latest entry.
func (e *env) requireEntries(t *testing.T, key string, leases ...*rwlock.Lease) {
	t.Helper()
	got := e.entries(t, key)
	want := map[string]bool{}
	for _, l := range leases {
		want[entry(l)] = true
	}
	require.Len(t, got, len(want), "holder entries %v", keysOf(got))
	now := e.serverMillis(t)
	var latest int64
	for m, score := range got {
		require.True(t, want[m], "unexpected entry %q", m)
		require.Greater(t, score, now-5, "entry %q must be unexpired", m) // nodes share the host clock
		latest = max(latest, score)
	}
	if len(got) > 0 {
		// The key's absolute expiry (PEXPIRETIME, Redis 7.0+) against the latest entry's score: both
		// server times, so no scheduling delay between two reads enters the comparison. The scripts
		// set PEXPIRE latest-now with now from TIME, frozen for the script: equal up to rounding.
		at, err := e.Raw.Do(ctx(t), e.Raw.B().Pexpiretime().Key(key).Build()).AsInt64()
		require.NoError(t, err)
		require.Greater(t, at, int64(0), "lock key must expire")
		require.InDelta(t, latest, at, 5, "key expiry must follow the latest entry")
	}
}

// entry is the sorted-set member of a lease.
func entry(l *rwlock.Lease) string {
	if l.Mode() == rwlock.Write {
		return "w:" + l.OwnerToken()
	}
	return "r:" + l.OwnerToken()
}

func keysOf(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// release releases l and asserts the outcome.
func release(t *testing.T, l *rwlock.Lease, want rwlock.ReleaseOutcome) {
	t.Helper()
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := l.Release(rctx)
	require.NoError(t, err)
	require.Equal(t, want, got, "release outcome")
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ctx returns a context for one scenario's I/O, cancelled at the end of the test.
var ctx = matrix.Ctx
