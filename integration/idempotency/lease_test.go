package idempotency_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
)

// testExtend: every transition of Extend (the owner-checked renewal of a pending claim's lease), one
// row each, asserting the server state it leaves.
func testExtend(t *testing.T, e *env) {
	s := e.store(t)
	tests := []struct {
		name string
		run  func(t *testing.T, key string)
	}{
		{"pending + extend by owner = true, expiry and x restarted at the new lease", func(t *testing.T, key string) {
			a := begin(t, s, key, 2*time.Second, fpA)
			ok, err := s.Extend(ctx(t), key, a.OwnerToken, long)
			require.NoError(t, err)
			require.True(t, ok)
			h := e.requirePending(t, key, long)
			require.Equal(t, "60000", h["x"])
			require.Greater(t, e.PTTL(t, key), (2 * time.Second).Milliseconds(), "renewed beyond the first lease")
			require.Equal(t, strconv.FormatInt(a.Generation, 10), h["g"], "same claim")
		}},
		{"pending + extend by another token or generation = false, unchanged", func(t *testing.T, key string) {
			a := begin(t, s, key, 2*time.Second, fpA)
			for _, tok := range []string{
				"ffffffffffffffffffffffffffffffff." + strconv.FormatInt(a.Generation, 10),
				a.OwnerToken[:33] + strconv.FormatInt(a.Generation+1, 10),
			} {
				ok, err := s.Extend(ctx(t), key, tok, long)
				require.NoError(t, err)
				require.False(t, ok)
			}
			require.Equal(t, "2000", e.requirePending(t, key, 2*time.Second)["x"])
		}},
		{"completed + extend = false, retention unchanged", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.Extend(ctx(t), key, a.OwnerToken, long)
			require.NoError(t, err)
			require.False(t, ok)
			e.requireCompleted(t, key, []byte("r"), 10*time.Second)
			require.Equal(t, "10000", e.hash(t, key)["x"])
		}},
		{"abandoned or absent + extend = false, nothing written", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			ok, err := s.Abandon(ctx(t), key, a.OwnerToken)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.Extend(ctx(t), key, a.OwnerToken, long)
			require.NoError(t, err)
			require.False(t, ok)
			e.requireAbsent(t, key)
		}},
		{"string key + extend = ErrForeignData, unchanged", func(t *testing.T, key string) {
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("v").Build()).Error())
			_, err := s.Extend(ctx(t), key, "0123456789abcdef0123456789abcdef.1", long)
			requireForeign(t, err)
			v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, "v", v)
		}},
		{"bad lease = ErrInvalidTTL before I/O", func(t *testing.T, key string) {
			a := begin(t, s, key, 2*time.Second, fpA)
			_, err := s.Extend(ctx(t), key, a.OwnerToken, 999*time.Microsecond)
			require.ErrorIs(t, err, idempotency.ErrInvalidTTL)
			require.ErrorIs(t, err, luakit.ErrInvalidConfig)
			require.Equal(t, "2000", e.requirePending(t, key, 2*time.Second)["x"])
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, "idem:extend:"+strconv.Itoa(i)) })
	}
}

// testRetentionOutlivesLease: a result stored under a short claim lease is kept for its retention:
// after the lease would have ended the key still replays the result, and its expiry is the retention.
func testRetentionOutlivesLease(t *testing.T, e *env) {
	s := e.store(t)
	key := "idem:retention"
	const lease = 200 * time.Millisecond
	a := begin(t, s, key, lease, fpA)
	requireState(t, a, idempotency.Started)
	ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("kept"), long)
	require.NoError(t, err)
	require.True(t, ok)
	require.Greater(t, e.PTTL(t, key), lease.Milliseconds(), "the retention, not the lease")
	time.Sleep(time.Until(a.Deadline) + 3*lease) // well past the lease: waiting, not measuring
	got := begin(t, s, key, lease, fpA)
	requireState(t, got, idempotency.Completed)
	require.Equal(t, []byte("kept"), got.Result)
	require.Equal(t, a.Generation, got.Generation)
	e.requireCompleted(t, key, []byte("kept"), long)
	// Without completion the same lease frees the key: the lease alone bounds a pending claim.
	b := begin(t, s, key+":pending", lease, fpA)
	e.requirePending(t, key+":pending", lease)
	e.waitGone(t, key+":pending")
	c := begin(t, s, key+":pending", lease, fpA)
	requireState(t, c, idempotency.Started)
	require.Greater(t, c.Generation, b.Generation)
}

// testKeepAlive: KeepAlive holds a claim far beyond its lease while duplicates are refused (never a
// second Started); stop ends renewing (the claim then expires after its lease); a claim deleted or
// taken over ends the keep-alive context with ErrLost, leaving the newer claim intact.
func testKeepAlive(t *testing.T, e *env) {
	owner, other := e.store(t), e.store(t)
	const lease = 900 * time.Millisecond

	t.Run("held beyond the lease, never overlapped", func(t *testing.T) {
		key := "idem:keepalive:held"
		a := begin(t, owner, key, lease, fpA)
		kctx, stop, err := keepAlive(owner, context.WithoutCancel(ctx(t)), key, a)
		require.NoError(t, err)
		defer stop()
		attempts := refuseDuplicates(t, other, key, a, kctx, 4*lease)
		stop()
		require.ErrorIs(t, context.Cause(kctx), context.Canceled, "stop cancels the context")
		ok, err := owner.Complete(ctx(t), key, a.OwnerToken, []byte("once"), long)
		require.NoError(t, err)
		require.True(t, ok, "the claim survived %d duplicates over 4 leases", attempts)
		e.requireCompleted(t, key, []byte("once"), long)
	})

	// A KeepAlive started with a third of a renew period left renews at once (it armed a whole period
	// and let the claim lapse).
	t.Run("started late, held", func(t *testing.T) {
		key := "idem:keepalive:late"
		a := begin(t, owner, key, lease, fpA)
		time.Sleep(time.Until(a.Deadline.Add(-lease / 9)))
		kctx, stop, err := keepAlive(owner, ctx(t), key, a)
		require.NoError(t, err)
		defer stop()
		refuseDuplicates(t, other, key, a, kctx, 3*lease)
	})

	t.Run("stop ends renewing", func(t *testing.T) {
		key := "idem:keepalive:stop"
		a := begin(t, owner, key, lease, fpA)
		_, stop, err := keepAlive(owner, ctx(t), key, a)
		require.NoError(t, err)
		stop()
		stop() // idempotent
		e.requirePending(t, key, lease)
		e.waitGone(t, key)
		requireState(t, begin(t, other, key, lease, fpA), idempotency.Started)
	})

	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprintf("lost, takeover=%v", takeover), func(t *testing.T) {
			key := "idem:keepalive:lost:" + strconv.FormatBool(takeover)
			a := begin(t, owner, key, lease, fpA)
			kctx, stop, err := keepAlive(owner, ctx(t), key, a)
			require.NoError(t, err)
			defer stop()
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(key).Build()).Error())
			var b idempotency.Attempt
			if takeover {
				b = begin(t, other, key, long, fpA)
				requireState(t, b, idempotency.Started)
			}
			select {
			case <-kctx.Done():
			case <-time.After(20 * time.Second):
				t.Fatal("the keep-alive context did not end after the claim was deleted")
			}
			require.ErrorIs(t, context.Cause(kctx), idempotency.ErrLost)
			require.ErrorIs(t, context.Cause(kctx), luakit.ErrLost)
			if takeover {
				h := e.requirePending(t, key, long)
				require.Equal(t, strconv.FormatInt(b.Generation, 10), h["g"], "the newer claim is intact")
				require.Equal(t, "60000", h["x"])
			} else {
				e.requireAbsent(t, key)
			}
		})
	}

	t.Run("many keep-alives, concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 40) // at most two per goroutine
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "idem:keepalive:many:" + strconv.Itoa(i)
				a, err := owner.TryBegin(ctx(t), key, lease, fpA)
				if err != nil {
					errs <- err
					return
				}
				kctx, stop, err := keepAlive(owner, ctx(t), key, a)
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(2 * lease)
				if kctx.Err() != nil {
					errs <- fmt.Errorf("keep-alive %d ended: %w", i, context.Cause(kctx))
				}
				stop()
				if ok, err := owner.Complete(ctx(t), key, a.OwnerToken, nil, long); err != nil || !ok {
					errs <- fmt.Errorf("complete %d: %v %w", i, ok, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

// testInspect: Inspect reports a claim's state, generation, TTLs and result size, never its token,
// and changes nothing: the hash and its PTTL are the same before and after (PTTL never grows).
func testInspect(t *testing.T, e *env) {
	s := e.store(t)
	snapshot := func(t *testing.T, key string) (map[string]string, int64) {
		return e.hash(t, key), e.PTTL(t, key)
	}
	inspect := func(t *testing.T, key string) idempotency.Inspection {
		t.Helper()
		h, p := snapshot(t, key)
		in, err := s.Inspect(ctx(t), key)
		require.NoError(t, err)
		h2, p2 := snapshot(t, key)
		require.Equal(t, h, h2, "Inspect changed the hash")
		require.LessOrEqual(t, p2, p, "Inspect refreshed the expiry")
		if p > 0 {
			require.Greater(t, p2, int64(0))
			require.LessOrEqual(t, in.Remaining.Milliseconds(), p)
			require.GreaterOrEqual(t, in.Remaining.Milliseconds(), p2)
		}
		return in
	}

	in := inspect(t, "idem:inspect:absent")
	require.Equal(t, idempotency.Inspection{}, in)
	e.requireAbsent(t, "idem:inspect:absent")

	key := "idem:inspect:claim"
	a := begin(t, s, key, long, fpA)
	in = inspect(t, key)
	require.Equal(t, idempotency.Inspection{Exists: true, State: idempotency.InProgress, Generation: a.Generation,
		TTL: long, Remaining: in.Remaining}, in)
	require.Positive(t, in.Remaining)
	require.NotContains(t, fmt.Sprintf("%+v %#v", in, in), a.OwnerToken[:32], "the owner token is never revealed")

	ok, err := s.Extend(ctx(t), key, a.OwnerToken, 2*long)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2*long, inspect(t, key).TTL, "TTL is the lease last granted")

	result := []byte(strings.Repeat("\x00\xff", 500))
	ok, err = s.Complete(ctx(t), key, a.OwnerToken, result, 3*long)
	require.NoError(t, err)
	require.True(t, ok)
	in = inspect(t, key)
	require.Equal(t, idempotency.Inspection{Exists: true, State: idempotency.Completed, Generation: a.Generation,
		TTL: 3 * long, Remaining: in.Remaining, ResultSize: 1000}, in)
	require.Greater(t, in.Remaining, 2*long)
	for range 3 {
		inspect(t, key) // repeated reads change nothing either
	}
	e.requireCompleted(t, key, result, 3*long)

	// A pending claim with a short lease still expires on time although inspected meanwhile.
	b := begin(t, s, key+":short", 300*time.Millisecond, fpA)
	requireState(t, b, idempotency.Started)
	inspect(t, key+":short")
	e.waitGone(t, key+":short")

	// Foreign data is reported and left alone.
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key("idem:inspect:string").Value("v").Build()).Error())
	_, err = s.Inspect(ctx(t), "idem:inspect:string")
	requireForeign(t, err)
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Hset().Key("idem:inspect:hash").FieldValue().FieldValue("other", "1").Build()).Error())
	_, err = s.Inspect(ctx(t), "idem:inspect:hash")
	requireForeign(t, err)
	require.Equal(t, map[string]string{"other": "1"}, e.hash(t, "idem:inspect:hash"))
}

// testOneRoundTrip: every operation is one script on the server (EVALSHA, or EVAL after NOSCRIPT),
// counted in INFO commandstats over every node.
func testOneRoundTrip(t *testing.T, e *env) {
	s := e.store(t)
	key := "idem:roundtrips"
	begin(t, s, key+":warm", long, fpA) // loads the begin script; the others are loaded below
	scripts := func() int64 {
		st := e.CommandStats(t)
		return st["evalsha"] + st["eval"]
	}
	var a idempotency.Attempt
	ops := []struct {
		name string
		run  func() error
	}{
		{"TryBegin", func() (err error) { a, err = s.TryBegin(ctx(t), key, long, fpA); return err }},
		{"Extend", func() error { _, err := s.Extend(ctx(t), key, a.OwnerToken, long); return err }},
		{"Inspect", func() error { _, err := s.Inspect(ctx(t), key); return err }},
		{"Complete", func() error { _, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), long); return err }},
		{"TryBegin (replay)", func() error { _, err := s.TryBegin(ctx(t), key, long, fpA); return err }},
		{"Abandon", func() error { _, err := s.Abandon(ctx(t), key, a.OwnerToken); return err }},
	}
	for _, op := range ops {
		for pass := range 2 { // the first pass may add the EVAL after NOSCRIPT
			before := scripts()
			require.NoError(t, op.run(), op.name)
			n := scripts() - before
			if pass == 1 || n != 2 {
				require.EqualValues(t, 1, n, "%s: scripts sent (pass %d)", op.name, pass)
			}
			if op.name == "TryBegin" && pass == 0 {
				break // a second TryBegin would be the replay row
			}
		}
	}
}

// refuseDuplicates begins key on other every 20ms for d while a's owner keeps its claim alive (kctx):
// each must find the claim in progress, of a's generation, and kctx must not end. It returns how many
// duplicates were refused.
func refuseDuplicates(t *testing.T, other *idempotency.Store, key string, a idempotency.Attempt, kctx context.Context, d time.Duration) int {
	t.Helper()
	attempts := 0
	for until := time.Now().Add(d); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		dup := begin(t, other, key, a.Lease, fpA)
		require.Equal(t, idempotency.InProgress, dup.State, "a duplicate started while the owner kept its claim alive")
		require.Equal(t, a.Generation, dup.Generation)
		attempts++
	}
	require.NoError(t, kctx.Err(), "the keep-alive context ended: %v", context.Cause(kctx))
	return attempts
}

// keepAlive is the old three-result shape over the Claim handle: Store.Claim, then Claim.KeepAlive,
// returning the claim's context and its Stop.
func keepAlive(s *idempotency.Store, ctx context.Context, key string, a idempotency.Attempt) (context.Context, func(), error) {
	c, err := s.Claim(key, a)
	if err != nil {
		return nil, nil, err
	}
	if err := c.KeepAlive(ctx); err != nil {
		return nil, nil, err
	}
	return c.Context(), c.Stop, nil
}
