package idempotency_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/redis/rueidis"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
)

// waited is what a Begin started by beginAsync returned, and when.
type waited struct {
	a   idempotency.Attempt
	err error
	at  time.Time
}

// beginAsync starts waiter.Begin on key (a claim lease of a minute) and returns where its result
// arrives. The wait ends after 20 s or when t ends, so a failed assertion leaves no goroutine behind.
func beginAsync(t *testing.T, waiter *idempotency.Store, key string) <-chan waited {
	t.Helper()
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	done := make(chan waited, 1)
	go func() {
		a, err := waiter.Begin(wctx, key, long, fpA)
		done <- waited{a, err, time.Now()}
	}()
	return done
}

// stillWaiting asserts that the Begin behind done has not returned after d.
func stillWaiting(t *testing.T, done <-chan waited, d time.Duration) {
	t.Helper()
	select {
	case r := <-done:
		t.Fatalf("Begin returned while the original was in progress: %v %v", r.a.State, r.err)
	case <-time.After(d):
	}
}

// endOriginal completes (result "original") or abandons the original claim a of key, and returns when.
func endOriginal(t *testing.T, orig *idempotency.Store, key string, a idempotency.Attempt, abandon bool) time.Time {
	t.Helper()
	at := time.Now()
	var (
		ok  bool
		err error
	)
	if abandon {
		ok, err = orig.Abandon(ctx(t), key, a.OwnerToken)
	} else {
		ok, err = orig.Complete(ctx(t), key, a.OwnerToken, []byte("original"), long)
	}
	require.NoError(t, err)
	require.True(t, ok)
	return at
}

// requireWaited waits (10 s at most) for the Begin behind done, which must have claimed key after an
// abandoned original, or got the completed original's result.
func requireWaited(t *testing.T, e *env, done <-chan waited, key string, abandon bool) waited {
	t.Helper()
	var r waited
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Begin still waiting 10 s after the original ended")
	}
	require.NoError(t, r.err)
	if abandon {
		requireState(t, r.a, idempotency.Started)
		e.requirePending(t, key, long)
	} else {
		requireState(t, r.a, idempotency.Completed)
		require.Equal(t, []byte("original"), r.a.Result)
	}
	return r
}

// testBeginWaits: Begin waits for an in-progress original and returns its result when it completes,
// or claims the key when the original abandons. With a tracker the claim lease is long, so only a
// wake-up, not the lease's end, can end the wait in time. On RESP2 no invalidation can arrive: the
// waiter wakes when the original's claim lease (1 s) would end, and logs one warning per Store.
func testBeginWaits(t *testing.T, e *env) {
	var logs bytes.Buffer // written by slog's handler under its own lock; read after the waits
	cases := []struct {
		name     string
		lease    time.Duration // the original's claim lease
		warnings int           // the warnings logged by the waiter's Store
		waiter   func(t *testing.T) *idempotency.Store
	}{
		{"tracked", long, 0, func(t *testing.T) *idempotency.Store { return e.trackedStore(t) }},
		{"resp2 wakes at the lease", time.Second, 1, func(t *testing.T) *idempotency.Store {
			s, err := idempotency.New(e.NewClient(t, nil, resp2), idempotency.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			require.NoError(t, err)
			return s
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs.Reset()
			orig, waiter := e.store(t), c.waiter(t)
			for _, abandon := range []bool{false, true} {
				key := "idem:wait:" + c.name + ":" + strconv.FormatBool(abandon)
				claimed := time.Now()
				a := begin(t, orig, key, c.lease, fpA)
				done := beginAsync(t, waiter, key)
				stillWaiting(t, done, 200*time.Millisecond)
				ended := endOriginal(t, orig, key, a, abandon)
				r := requireWaited(t, e, done, key, abandon)
				if c.lease == long {
					require.Less(t, r.at.Sub(ended), 10*time.Second, "woken by the invalidation, long before the claim's lease")
				} else {
					require.Less(t, r.at.Sub(claimed), c.lease+time.Second, "woken when the claim's lease would end")
				}
			}
			require.Equal(t, c.warnings, strings.Count(logs.String(), "level=WARN"), "one warning per Store waiting without invalidations: %s", logs.String())
		})
	}
	// A wait bounded by ctx ends with ctx's error and leaves the claim alone.
	s := e.trackedStore(t)
	key := "idem:wait:ctx"
	begin(t, s, key, long, fpA)
	wctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := s.Begin(wctx, key, long, fpA)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	e.requirePending(t, key, long)
}

// testBeginSleepsWhileHeld: a Begin waiting on another owner's claim for 2 s sleeps instead of polling,
// on a Store given no option: its client comes from luakit.NewTrackedClient, whose tracker Begin finds
// by itself. Counted on the server (INFO commandstats over every node, nothing else runs meanwhile):
// the claim script's runs (EVALSHA, EVAL) and the PTTL reads (the script's own read of a pending
// claim's remaining lease, and rueidis' cached arming read, which sends PTTL twice), at most
// maxWaitCmds in the 2 s, plus perReset for each connection of the waiter's client that closed
// meanwhile: rueidis then reports a nil invalidation, which wakes every waiter to try again (a Cluster
// client closes connections its topology refresh replaced). When the original completes (or
// abandons) the waiter gets the result (or the claim) at once, long before the claim's lease could end.
//
// Measured on standalone and Sentinel targets: 2 (one attempt, whose own reads armed tracking); on a
// Cluster: 6 (an attempt, an arming read, a second attempt). Once, in a full run on valkey-cluster
// before resets were counted, 10: two more attempts, the arming read served from rueidis' cache, so
// no invalidation of the key woke them (a nil one is the likely cause). Begin polling every 100 ms
// sent 40 (20 attempts).
func testBeginSleepsWhileHeld(t *testing.T, e *env) {
	const (
		hold        = 2 * time.Second
		maxWaitCmds = 10 // measured 2 to 6; polling sends 40
		perReset    = 4  // an attempt, and an arming read when the reset dropped the cached one
	)
	orig := e.store(t)
	var resets atomic.Int64
	waiter, err := idempotency.New(e.NewClient(t, luakit.NewTracker(), func(o *rueidis.ClientOption) {
		o.OnInvalidations = func(m []rueidis.RedisMessage) {
			if m == nil {
				resets.Add(1)
			}
		}
	}))
	require.NoError(t, err)
	counted := func() (int64, map[string]int64) {
		st := e.CommandStats(t)
		return st["evalsha"] + st["eval"] + st["pttl"], st
	}
	for _, abandon := range []bool{false, true} {
		t.Run("abandon="+strconv.FormatBool(abandon), func(t *testing.T) {
			key := "idem:sleeps:" + strconv.FormatBool(abandon)
			a := begin(t, orig, key, long, fpA)
			requireState(t, a, idempotency.Started)

			r0 := resets.Load()
			n0, st0 := counted()
			done := beginAsync(t, waiter, key)
			stillWaiting(t, done, hold)
			n1, st1 := counted()
			n, r := n1-n0, resets.Load()-r0
			sent := e.CommandsBetween(st0, st1)
			t.Logf("%s: waiter's script runs and PTTL reads in %v: %d (connection resets: %d); every command: %v", e.Name, hold, n, r, sent)
			require.LessOrEqual(t, n, maxWaitCmds+perReset*r, "Begin polled while the claim was held: %v", sent)

			ended := endOriginal(t, orig, key, a, abandon)
			w := requireWaited(t, e, done, key, abandon)
			t.Logf("%s: Begin returned %v after the original ended", e.Name, w.at.Sub(ended).Round(100*time.Microsecond))
			require.Less(t, w.at.Sub(ended), time.Second, "woken by the invalidation, not by the claim's lease")
		})
	}
}
