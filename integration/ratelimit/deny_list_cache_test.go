package ratelimit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// denyListCacheScenarios returns the scenarios of this file.
func denyListCacheScenarios() []scenario {
	return []scenario{
		{Name: "deny_inflight_bound", Run: denyInflightBound},
		{Name: "deny_write_failure_clears_cache", Run: denyWriteFailure},
		{Name: "deny_zero_duration_no_sharing", Run: denyZeroDuration},
		{Name: "deny_concurrent_hammer", Run: denyHammer},
		{Name: "deny_caller_reads_cancellable", Run: denyCallerReadsCancellable},
		{Name: "deny_failed_write_invalidates", Run: denyFailedWrite},
	}
}

// The in-flight bookkeeping holds at most the cache capacity (2): while the server holds two shared
// reads, a miss for a third identity reads on its own with the caller's context (cancellable without
// touching the others) and caches nothing; a miss for an identity already in flight still joins it.
func denyInflightBound(t *testing.T, e *env) {
	// One connection, dialled by denySet before the pause: with several, a read could be the first
	// command of a pipe and dial it under the caller's context, and cancelling that caller then fails
	// the dial for the shared reads queued on it (seen once: "dial tcp: operation was canceled").
	c := e.NewClient(t, nil, matrix.NoCache, matrix.OneConn)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute), denylist.WithCacheCapacity(2))
	denySet(t, dl, "c", true)

	unpause := denyPauseWrites(t, e, dl.Key())
	a := denyAsync(ctx(t), dl, "a")
	b := denyAsync(ctx(t), dl, "b")
	denyEventually(t, dl, "two shared reads start", func(s denylist.Stats) bool { return s.ServerReads == 2 })
	cctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	c1 := denyAsync(cctx, dl, "c")
	denyEventually(t, dl, "an independent read starts", func(s denylist.Stats) bool { return s.ServerReads == 3 })
	c2 := denyAsync(ctx(t), dl, "c")
	denyEventually(t, dl, "a second independent read starts", func(s denylist.Stats) bool { return s.ServerReads == 4 })
	a2 := denyAsync(ctx(t), dl, "a")
	denyEventually(t, dl, "a miss for a read in flight joins it", func(s denylist.Stats) bool { return s.SharedReads == 1 })

	cancel()
	got := denyRecv(t, c1)
	require.ErrorIs(t, got.err, context.Canceled, "an independent read is the caller's: its cancellation ends it")

	unpause()
	for _, ch := range []<-chan denyAnswer{a, b, a2} {
		got := denyRecv(t, ch)
		require.NoError(t, got.err)
		require.False(t, got.denied)
	}
	got = denyRecv(t, c2)
	require.NoError(t, got.err)
	require.True(t, got.denied)

	s := dl.Stats()
	require.Equal(t, denylist.Stats{Misses: 5, SharedReads: 1, ServerReads: 4, Cached: 2}, s)
	denyIs(t, dl, "a", false)
	denyIs(t, dl, "b", false)
	require.Equal(t, s.Hits+2, dl.Stats().Hits, "the shared reads filled the cache")
	denyIs(t, dl, "c", true)
	require.Equal(t, s.ServerReads+1, dl.Stats().ServerReads, "the independent reads cached nothing")
}

// Writes rejected before I/O (empty identity, context already done) keep the cache and write nothing;
// a write that fails after it was sent (here: its deadline passes while the server holds it) is
// uncertain and still empties the cache.
func denyWriteFailure(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute))
	denyIs(t, dl, "a", false)
	denyIs(t, dl, "b", false)
	require.Equal(t, 2, dl.Stats().Cached)

	require.ErrorIs(t, dl.SetDenied(ctx(t), "", true), ratelimit.ErrEmptyIdentity)
	done, cancel := context.WithCancel(ctx(t))
	cancel()
	require.ErrorIs(t, dl.SetDenied(done, "a", true), context.Canceled)
	require.Equal(t, 2, dl.Stats().Cached, "rejected writes keep the cache")
	require.False(t, e.exists(t, dl.Key()), "rejected writes write nothing")

	unpause := denyPauseWrites(t, e, dl.Key())
	short, cancelShort := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancelShort()
	err := dl.SetDenied(short, "a", true)
	require.ErrorIs(t, err, ratelimit.ErrUncertain)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, dl.Stats().Cached, "a failed write empties the cache")
	unpause()
}

// A zero cache duration disables read sharing too: concurrent misses for one identity each read the
// server, and nothing is cached.
func denyZeroDuration(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(0))
	denySet(t, dl, "z", true)
	unpause := denyPauseWrites(t, e, dl.Key())
	const n = 4
	answers := make([]<-chan denyAnswer, n)
	for i := range answers {
		answers[i] = denyAsync(ctx(t), dl, "z")
	}
	denyEventually(t, dl, "every caller reads", func(s denylist.Stats) bool { return s.ServerReads == n })
	unpause()
	for _, ch := range answers {
		got := denyRecv(t, ch)
		require.NoError(t, got.err)
		require.True(t, got.denied)
	}
	require.Equal(t, denylist.Stats{Misses: n, ServerReads: n}, dl.Stats())
}

// 32 readers over 8 identities with a cache of 4 (evictions, the in-flight bound reached, shared and
// independent reads), while writers flip memberships and call Invalidate, under -race. Every call
// succeeds, the counters add up, the cache never exceeds its capacity, and after the writers' last
// SetDenied the instance reads exactly what the server holds.
func denyHammer(t *testing.T, e *env) {
	c := e.NewClient(t, nil, matrix.NoCache)
	dl := denyList(t, c, e.key(t), denylist.WithCacheDuration(time.Minute), denylist.WithCacheCapacity(4))
	const identities, readers, rounds = 8, 32, 100
	id := func(i int) string { return fmt.Sprintf("id:%d", i%identities) }

	cx := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, readers+2)
	for r := range readers {
		wg.Go(func() {
			for i := range rounds {
				if _, err := dl.IsDenied(cx, id(r+i)); err != nil {
					errs <- err
					return
				}
				if s := dl.Stats(); s.Cached > 4 {
					errs <- fmt.Errorf("cache holds %d > 4", s.Cached)
					return
				}
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for i := range rounds / 4 {
				if err := dl.SetDenied(cx, id(w*3+i), i%2 == 0); err != nil {
					errs <- err
					return
				}
				dl.Invalidate()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s := dl.Stats()
	require.Equal(t, s.Misses, s.SharedReads+s.ServerReads, "every miss joined or sent a read (%+v)", s)
	require.Equal(t, int64(readers*rounds), s.Hits+s.Misses)

	dl.Invalidate()
	for i := range identities {
		member, err := e.Raw.Do(ctx(t), e.Raw.B().Sismember().Key(dl.Key()).Member(id(i)).Build()).AsBool()
		require.NoError(t, err)
		denyIs(t, dl, id(i), member)
	}
}

// waitScriptsHeld waits until the server owning key holds at least n clients blocked on a script
// (CLIENT LIST: flags with b, cmd=evalsha, or cmd=eval while this process has not yet learnt the
// script's digest from a server), as CLIENT PAUSE postpones them.
func waitScriptsHeld(t *testing.T, e *env, key string, n int) {
	t.Helper()
	node := e.nodeOf(t, key)
	require.Eventually(t, func() bool {
		v, err := node.Do(ctx(t), "CLIENT", "LIST")
		if err != nil {
			return false
		}
		list, _ := v.ToString()
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
		return held >= n
	}, 20*time.Second, time.Millisecond, "%d script(s) held by the server", n)
}

// Reads and writes that use the caller's context (a zero cache duration, the in-flight bound reached,
// SetDenied) end when the caller cancels, even when the command is the first one on its connection and
// the context has a deadline (rueidis then sends it synchronously, with a socket deadline, unless the
// context carries none), and the cancellation does not break the connection: a shared read of another
// instance on the same client, held by the server meanwhile, still answers.
func denyCallerReadsCancellable(t *testing.T, e *env) {
	key := e.key(t)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Sadd().Key(key).Member("x").Build()).Error())

	t.Run("read", func(t *testing.T) {
		c := e.NewClient(t, nil, matrix.NoCache) // fresh: the direct read is its first command
		direct := denyList(t, c, key, denylist.WithCacheDuration(0))
		shared := denyList(t, c, key, denylist.WithCacheDuration(time.Minute))
		unpause := denyPauseWrites(t, e, key)
		cctx, cancel := context.WithTimeout(ctx(t), time.Minute)
		defer cancel()
		read := denyAsync(cctx, direct, "x")
		waitScriptsHeld(t, e, key, 1)
		other := denyAsync(ctx(t), shared, "x")
		denyEventually(t, shared, "a shared read is sent", func(s denylist.Stats) bool { return s.ServerReads == 1 })
		cancel()
		got := denyRecv(t, read)
		require.ErrorIs(t, got.err, context.Canceled, "the caller's cancellation ends its own read")
		unpause()
		got = denyRecv(t, other)
		require.NoError(t, got.err, "the connection survived the cancelled read")
		require.True(t, got.denied)
	})

	t.Run("write", func(t *testing.T) {
		c := e.NewClient(t, nil, matrix.NoCache) // fresh: the write is its first command
		writer := denyList(t, c, key)
		unpause := denyPauseWrites(t, e, key)
		wctx, cancel := context.WithTimeout(ctx(t), time.Minute)
		defer cancel()
		werr := make(chan error, 1)
		go func() { werr <- writer.SetDenied(wctx, "y", true) }()
		waitScriptsHeld(t, e, key, 1)
		cancel()
		select {
		case err := <-werr:
			require.ErrorIs(t, err, ratelimit.ErrUncertain, "the write was sent")
			require.ErrorIs(t, err, context.Canceled, "the caller's cancellation ends its write")
		case <-time.After(30 * time.Second):
			t.Fatal("SetDenied did not return after its context was cancelled")
		}
		unpause()
		denyIs(t, writer, "x", true) // the client still works
	})
}

// A SetDenied whose write fails still empties this instance's cache: a cached identity is read from
// the server again afterwards. Rejected by the server (WRONGTYPE, nothing written), and failed after it
// was sent (cancelled while the server holds it): there, a read that started after the first
// invalidation and answers after the failed write must not refill the cache, which only the
// invalidation after the write prevents.
func denyFailedWrite(t *testing.T, e *env) {
	t.Run("wrong_type", func(t *testing.T) {
		key := e.key(t)
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Sadd().Key(key).Member("a").Build()).Error())
		dl := denyList(t, e.NewClient(t, nil, matrix.NoCache), key, denylist.WithCacheDuration(time.Minute))
		denyIs(t, dl, "a", true)
		denyIs(t, dl, "a", true)
		st := dl.Stats()
		require.Equal(t, int64(1), st.ServerReads)
		require.Equal(t, int64(1), st.Hits, "cached")

		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(key).Build()).Error())
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("x").Build()).Error())
		require.ErrorIs(t, dl.SetDenied(ctx(t), "b", true), ratelimit.ErrForeignData)
		require.Equal(t, "x", e.dump(t, key)[""], "nothing written")
		require.Zero(t, dl.Stats().Cached, "the failed write emptied the cache")

		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(key).Build()).Error())
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Sadd().Key(key).Member("a").Build()).Error())
		denyIs(t, dl, "a", true)
		require.Equal(t, int64(2), dl.Stats().ServerReads, "read from the server again")
	})

	t.Run("failed_after_send", func(t *testing.T) {
		key := e.key(t)
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Sadd().Key(key).Member("a").Build()).Error())
		dl := denyList(t, e.NewClient(t, nil, matrix.NoCache), key, denylist.WithCacheDuration(time.Minute))
		denySet(t, dl, "c", false) // loads the write script: the held write is then an EVALSHA that runs
		denyIs(t, dl, "a", true)
		require.Equal(t, int64(1), dl.Stats().ServerReads)

		unpause := denyPauseWrites(t, e, key)
		wctx, cancel := context.WithCancel(ctx(t))
		defer cancel()
		werr := make(chan error, 1)
		go func() { werr <- dl.SetDenied(wctx, "b", true) }()
		waitScriptsHeld(t, e, key, 1) // the write is on the server: the first invalidation ran
		read := denyAsync(ctx(t), dl, "a")
		denyEventually(t, dl, "after the first invalidation the cached identity is a miss",
			func(s denylist.Stats) bool { return s.ServerReads == 2 })
		cancel()
		select {
		case err := <-werr:
			require.ErrorIs(t, err, ratelimit.ErrUncertain)
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(30 * time.Second):
			t.Fatal("SetDenied did not return after its cancellation")
		}
		unpause()
		got := denyRecv(t, read)
		require.NoError(t, got.err)
		require.True(t, got.denied, "the read answers its caller")
		member, err := e.Raw.Do(ctx(t), e.Raw.B().Sismember().Key(key).Member("b").Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), member, "the uncertain write ran (before the read, on one connection)")

		require.Zero(t, dl.Stats().Cached, "the read in flight during the failed write did not fill the cache")
		denyIs(t, dl, "a", true)
		require.Equal(t, int64(3), dl.Stats().ServerReads, "read from the server again")
	})
}
