package lock_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// 16. Acquire on a client from luakit.NewTrackedClient, with no WithTracker option, wakes on the
// holder's release: the holder's lease has 30 s to run and the waiter's ctx only 5 s, so only an
// invalidation can hand it over in time. The waiter arms tracking, then sends nothing until the
// release, and logs no warning. On a standalone target its busy attempt arms tracking itself (CLIENT
// CACHING YES before the acquire script, whose PTTL read of the lease key is tracked): no separate
// PTTL read; on Cluster it arms with a cached PTTL read after the attempt.
func testHandoffTrackedClient(t *testing.T, e *env) {
	const (
		rounds = 5
		ttl    = 30 * time.Second
	)
	c := ctx(t)
	ln, lk, fk := named("s16")
	holder := e.locker(t)
	counter := newCmdCounter()
	logs := &logRecorder{}
	waiter := newLocker(t, e.NewClient(t, luakit.NewTracker(), counter.counted()...), lock.WithLogger(slog.New(logs)))
	for round := range rounds {
		h, err := holder.TryAcquire(c, ln, ttl)
		require.NoError(t, err, "round %d", round)

		before := counter.snapshot()
		var statsBefore map[string]int64
		if e.Cluster == nil {
			statsBefore = e.CommandStats(t)
		}
		wctx, cancel := context.WithTimeout(c, 5*time.Second)
		ch := acquireAsync(wctx, waiter, ln, ttl)
		// Only a waiter that found the client's tracker arms tracking: with CLIENT CACHING YES before
		// its attempt (standalone), or with a PTTL read after it (Cluster).
		armed := counter.waitQuiet(t, before, armingCommand(e), 20*time.Millisecond, 3*time.Second)
		if d, _ := delta(before, armed); e.Cluster == nil {
			require.Equal(t, int64(1), d["EVALSHA"], "round %d: one attempt before sleeping (%v)", round, d)
			require.Zero(t, d["PTTL"], "round %d: the attempt armed tracking itself: no arming read (%v)", round, d)
			// On the server, the busy attempt read only the lease's PTTL: no counter read, no SET.
			ran := e.CommandsSince(t, statsBefore)
			require.Equal(t, map[string]int64{"evalsha": 1, "pttl": 1, "get": 0, "set": 0, "incr": 0},
				map[string]int64{"evalsha": ran["evalsha"], "pttl": ran["pttl"], "get": ran["get"], "set": ran["set"], "incr": ran["incr"]},
				"round %d: commands the server ran for the waiter's busy attempt", round)
		}

		start := time.Now()
		release(t, h, lock.Released)
		r := await(t, ch, 10*time.Second)
		cancel()
		require.NoError(t, r.err, "round %d: the waiter must take over long before the holder's 30 s TTL", round)
		took := r.at.Sub(start)
		t.Logf("round %d: hand-off %v after the release (holder TTL %v)", round, took.Round(100*time.Microsecond), ttl)
		require.Less(t, took, time.Second, "round %d: hand-off latency", round)
		require.Greater(t, r.lease.FencingToken(), h.FencingToken())
		e.requireLease(t, lk, r.lease.OwnerToken())
		e.requireCounter(t, fk, strconv.FormatInt(r.lease.FencingToken(), 10))
		release(t, r.lease, lock.Released)
	}
	counter.check(t)
	require.Empty(t, logs.warnings(), "no warning on a tracked client")
	e.requireAbsent(t, lk, "lease key")
}

// 17. On a client without working tracking (a NewTrackedClient client with DisableCache, and a plain
// rueidis client, which has no tracker), Acquire logs one warning per Locker, however many waits, and
// still acquires once the holder's TTL passed. A second Locker on the same client warns once more.
func testUntrackedWarnsOnce(t *testing.T, e *env) {
	const (
		rounds = 3
		ttl    = 300 * time.Millisecond
	)
	cases := []struct {
		name   string
		client func(t *testing.T) rueidis.Client
		reason string // in the warning's reason attribute
	}{
		{"cache_disabled", func(t *testing.T) rueidis.Client {
			return e.NewClient(t, luakit.NewTracker(), matrix.NoCache)
		}, "client-side caching is off"},
		{"no_tracker", func(t *testing.T) rueidis.Client { return e.NewClient(t, nil) }, "no tracker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ctx(t)
			ln, lk, _ := named("s17:" + tc.name)
			holder := e.locker(t)
			client := tc.client(t)
			wait := func(waiter *lock.Locker) {
				t.Helper()
				h, err := holder.TryAcquire(c, ln, ttl)
				require.NoError(t, err)
				r := await(t, acquireAsync(c, waiter, ln, 10*time.Second), 10*time.Second)
				require.NoError(t, r.err)
				require.True(t, r.at.After(h.Deadline()), "nothing can wake the waiter before the holder's TTL")
				release(t, h, lock.NotOwned)
				release(t, r.lease, lock.Released)
			}

			logs := &logRecorder{}
			waiter := newLocker(t, client, lock.WithLogger(slog.New(logs)))
			for range rounds {
				wait(waiter)
			}
			ws := logs.warnings()
			require.Len(t, ws, 1, "one warning per Locker, after %d waits: %v", rounds, ws)
			require.Contains(t, ws[0].msg, "waiting without invalidations")
			require.Contains(t, ws[0].attrs["reason"], tc.reason)
			t.Logf("warning: %s (reason: %s)", ws[0].msg, ws[0].attrs["reason"])

			other := &logRecorder{}
			wait(newLocker(t, client, lock.WithLogger(slog.New(other))))
			require.Len(t, other.warnings(), 1, "a second Locker warns once too")
			require.Len(t, logs.warnings(), 1, "the first Locker did not warn again")
			e.requireAbsent(t, lk, "lease key")
		})
	}
}

// logRecorder is a slog.Handler that keeps every record at warning level or above.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

func (h *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// warnings returns the records about waiting without invalidations.
func (h *logRecorder) warnings() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range h.recs {
		if strings.Contains(r.msg, "waiting without invalidations") {
			out = append(out, r)
		}
	}
	return out
}
