package counter_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
)

type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_limit_exact_concurrent", Run: testLimitConcurrent},
	{Name: "02_ttl_semantics", Run: testTTLSemantics},
	{Name: "03_decrement_floor", Run: testDecrementFloor},
	{Name: "04_values_above_2_53", Run: testAbove2p53},
	{Name: "05_overflow_and_malformed", Run: testOverflow},
	{Name: "06_batch_order_across_slots", Run: testBatchOrder},
	{Name: "07_buffered_flush", Run: testBuffered},
	{Name: "08_bounded_never_exceeds", Run: testBoundedConcurrent},
	{Name: "09_close_bounded_by_ctx", Run: testCloseBoundedByCtx},
	{Name: "10_disconnect_fails_fast", Run: testDisconnect},
	{Name: "11_one_round_trip_per_call_and_batch", Run: testOneRoundTrip},
	{Name: "12_batch_recovers_after_script_flush", Run: testBatchAfterScriptFlush},
	{Name: "13_binary_keys", Run: testBinaryKeys},
	{Name: "14_close_keeps_callers_client", Run: testCloseKeepsClient},
	{Name: "15_buffered_rebuffers_only_certain_failures", Run: testBufferedRebuffer},
	{Name: "16_store_created_while_down", Run: testCreatedWhileDown}, // kills and restarts the server (node)
	{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
	{Name: "91_buffered_refused_flush_not_counted_twice", Run: testBufferedRefusedFlush},
}

// TestCounter runs every scenario on every target. Targets run in parallel (at most
// matrix.MaxParallelTargets at once), each with its own server or cluster; scenarios of one target run in
// order on it, each on its own keys.
func TestCounter(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}

// testLimitConcurrent: 32 goroutines race IncrementUpTo; exactly limit/delta are allowed, the
// final value is the largest multiple of delta up to the limit, and the fixed-window TTL was set once.
func testLimitConcurrent(t *testing.T, e *env) {
	const (
		limit   = 1000
		delta   = 3
		workers = 32
	)
	s := e.store(t)
	key := "ck:limit:concurrent"
	var allowed, refused atomic.Int64
	var maxSeen atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				res, err := s.IncrementUpTo(ctx(t), key, delta, limit, time.Minute)
				if err != nil {
					errs <- err
					return
				}
				for {
					m := maxSeen.Load()
					if res.Value <= m || maxSeen.CompareAndSwap(m, res.Value) {
						break
					}
				}
				if !res.Allowed {
					refused.Add(1)
					return
				}
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, limit/delta, allowed.Load(), "allowed increments")
	require.EqualValues(t, workers, refused.Load())
	require.LessOrEqual(t, maxSeen.Load(), int64(limit), "no reply may report a value above the limit")
	e.requireValue(t, key, strconv.Itoa(limit/delta*delta))
	p := e.PTTL(t, key)
	require.Greater(t, p, int64(0))
	require.LessOrEqual(t, p, int64(time.Minute/time.Millisecond))
}

// testTTLSemantics: IncrementWithExpire sets the TTL on every call (sliding) and leaves it alone with
// ttl 0; IncrementUpTo sets it only when it creates the key; a refusal changes nothing.
func testTTLSemantics(t *testing.T, e *env) {
	s := e.store(t)
	c := ctx(t)

	slide := "ck:ttl:slide"
	v, err := s.IncrementWithExpire(c, slide, 5, 2*time.Second)
	require.NoError(t, err)
	require.EqualValues(t, 5, v)
	p := e.PTTL(t, slide)
	require.True(t, p > 0 && p <= 2000, "pttl %d", p)
	v, err = s.IncrementWithExpire(c, slide, -2, time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 3, v)
	require.Greater(t, e.PTTL(t, slide), int64(2000), "a later ttl replaces the expiry (sliding)")
	before := e.PTTL(t, slide)
	_, err = s.IncrementWithExpire(c, slide, 1, 0)
	require.NoError(t, err)
	after := e.PTTL(t, slide)
	require.True(t, after > 0 && after <= before, "ttl 0 leaves the expiry: %d then %d", before, after)

	persist := "ck:ttl:persist"
	_, err = s.IncrementWithExpire(c, persist, 1, 0)
	require.NoError(t, err)
	require.EqualValues(t, -1, e.PTTL(t, persist), "no ttl, no expiry")

	fixed := "ck:ttl:fixed"
	res, err := s.IncrementUpTo(c, fixed, 1, 10, 2*time.Second)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.EqualValues(t, 1, res.Value)
	require.True(t, res.Remaining > 0 && res.Remaining <= 2*time.Second && !res.NoExpiry, "Remaining %v", res.Remaining)
	res, err = s.IncrementUpTo(c, fixed, 1, 10, time.Hour)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.True(t, res.Remaining > 0 && res.Remaining <= 2*time.Second, "an existing key keeps its window: %v", res.Remaining)
	p = e.PTTL(t, fixed)
	require.True(t, p > 0 && p <= 2000, "pttl %d", p)

	// An existing key without expiry keeps none.
	_, err = s.IncrementWithExpire(c, "ck:ttl:fixed-persist", 1, 0)
	require.NoError(t, err)
	res, err = s.IncrementUpTo(c, "ck:ttl:fixed-persist", 1, 10, time.Hour)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Zero(t, res.Remaining)
	require.True(t, res.NoExpiry)
	require.EqualValues(t, -1, e.PTTL(t, "ck:ttl:fixed-persist"))

	// A refusal writes nothing: value and expiry unchanged; on an absent key nothing is created.
	res, err = s.IncrementUpTo(c, fixed, 9, 10, time.Hour)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.EqualValues(t, 2, res.Value)
	require.True(t, res.Remaining > 0 && res.Remaining <= 2*time.Second)
	e.requireValue(t, fixed, "2")
	res, err = s.IncrementUpTo(c, "ck:ttl:absent", 5, 4, time.Hour)
	require.NoError(t, err)
	require.Equal(t, counter.Result{}, res, "refused on an absent key: value 0, no life, not NoExpiry")
	require.EqualValues(t, -2, e.PTTL(t, "ck:ttl:absent"), "a refusal creates nothing")

	// Expiry resets the window: the counter reads as 0 again.
	win := "ck:ttl:window"
	_, err = s.IncrementUpTo(c, win, 3, 3, 50*time.Millisecond)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.PTTL(t, win) == -2 }, 5*time.Second, 10*time.Millisecond)
	got, err := s.Get(c, win)
	require.NoError(t, err)
	require.Zero(t, got)
	res, err = s.IncrementUpTo(c, win, 3, 3, time.Minute)
	require.NoError(t, err)
	require.True(t, res.Allowed, "a new window allows again")
}

// testDecrementFloor: DecrementDownTo is allowed iff current - delta >= floor (the value may reach
// the floor), never changes the expiry (Remaining reports the key's life), and creates an absent key
// without expiry when allowed.
func testDecrementFloor(t *testing.T, e *env) {
	s := e.store(t)
	c := ctx(t)
	key := "ck:floor"
	_, err := s.IncrementWithExpire(c, key, 10, time.Minute)
	require.NoError(t, err)
	res, err := s.DecrementDownTo(c, key, 4, 5)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.EqualValues(t, 6, res.Value)
	require.True(t, res.Remaining > 50*time.Second && res.Remaining <= time.Minute && !res.NoExpiry, "Remaining %v", res.Remaining)
	res, err = s.DecrementDownTo(c, key, 2, 5)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.EqualValues(t, 6, res.Value)
	require.True(t, res.Remaining > 50*time.Second && res.Remaining <= time.Minute, "Remaining %v", res.Remaining)
	e.requireValue(t, key, "6")
	p := e.PTTL(t, key)
	require.True(t, p > 0 && p <= 60000, "expiry unchanged by decrements: %d", p)

	res, err = s.DecrementDownTo(c, "ck:floor:absent", 1, 0)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: false, Value: 0}, res, "absent: no life, not NoExpiry")
	require.EqualValues(t, -2, e.PTTL(t, "ck:floor:absent"))
	res, err = s.DecrementDownTo(c, "ck:floor:absent", 3, -5)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: -3, NoExpiry: true}, res)
	e.requireValue(t, "ck:floor:absent", "-3")
	require.EqualValues(t, -1, e.PTTL(t, "ck:floor:absent"))
	res, err = s.DecrementDownTo(c, "ck:floor:absent", 1, math.MinInt64)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: -4, NoExpiry: true}, res)
}

// testAbove2p53: values whose neighbours are not doubles round-trip exactly through every operation.
func testAbove2p53(t *testing.T, e *env) {
	s := e.store(t)
	c := ctx(t)
	key := "ck:big"
	e.set(t, key, "9007199254740992") // 2^53
	v, err := s.IncrementWithExpire(c, key, 1, 0)
	require.NoError(t, err)
	require.EqualValues(t, int64(9007199254740993), v)
	res, err := s.IncrementUpTo(c, key, 1, 9007199254740995, 0)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: 9007199254740994, NoExpiry: true}, res)
	res, err = s.IncrementUpTo(c, key, 2, 9007199254740995, 0)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: false, Value: 9007199254740994, NoExpiry: true}, res, "994+2 > 995 must be refused exactly")
	res, err = s.IncrementUpTo(c, key, 1, 9007199254740995, 0)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: 9007199254740995, NoExpiry: true}, res)
	e.requireValue(t, key, "9007199254740995")
	d, err := s.DecrementDownTo(c, key, 2, 9007199254740993)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: 9007199254740993, NoExpiry: true}, d)
	d, err = s.DecrementDownTo(c, key, 1, 9007199254740993)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	got, err := s.Get(c, key)
	require.NoError(t, err)
	require.EqualValues(t, int64(9007199254740993), got)

	// Near the int64 maximum, limit comparisons are still exact.
	top := "ck:big:top"
	e.set(t, top, strconv.FormatInt(math.MaxInt64-2, 10))
	res, err = s.IncrementUpTo(c, top, 3, math.MaxInt64, 0)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	res, err = s.IncrementUpTo(c, top, 2, math.MaxInt64, 0)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: math.MaxInt64, NoExpiry: true}, res)
	neg := "ck:big:neg"
	e.set(t, neg, strconv.FormatInt(math.MinInt64+2, 10))
	d, err = s.DecrementDownTo(c, neg, 3, math.MinInt64)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	d, err = s.DecrementDownTo(c, neg, 2, math.MinInt64)
	require.NoError(t, err)
	require.Equal(t, counter.Result{Allowed: true, Value: math.MinInt64, NoExpiry: true}, d)

	vals, err := s.BatchIncrement(c, []counter.Increment{{Key: "ck:big:b1", Delta: 9007199254740993}, {Key: "ck:big:b1", Delta: 2}})
	require.NoError(t, err)
	require.Equal(t, []int64{9007199254740993, 9007199254740995}, vals)
	many, err := s.GetMany(c, []string{"ck:big:b1", key, "ck:big:none", top})
	require.NoError(t, err)
	require.Equal(t, []counter.Value{{N: 9007199254740995, Exists: true}, {N: 9007199254740993, Exists: true}, {}, {N: math.MaxInt64, Exists: true}}, many)
}

// testOverflow: an increment past int64 fails with ErrOverflow and writes nothing (no value change, no
// expiry); a non-integer value fails with ErrNotInteger and writes nothing.
func testOverflow(t *testing.T, e *env) {
	s := e.store(t)
	c := ctx(t)
	key := "ck:overflow"
	e.set(t, key, strconv.FormatInt(math.MaxInt64-1, 10))
	_, err := s.IncrementWithExpire(c, key, 2, time.Minute)
	require.ErrorIs(t, err, counter.ErrOverflow)
	e.requireValue(t, key, strconv.FormatInt(math.MaxInt64-1, 10))
	require.EqualValues(t, -1, e.PTTL(t, key), "no expiry written")
	low := "ck:overflow:low"
	e.set(t, low, strconv.FormatInt(math.MinInt64, 10))
	_, err = s.IncrementWithExpire(c, low, -1, time.Minute)
	require.ErrorIs(t, err, counter.ErrOverflow)
	e.requireValue(t, low, strconv.FormatInt(math.MinInt64, 10))
	require.EqualValues(t, -1, e.PTTL(t, low))

	vals, err := s.BatchIncrement(c, []counter.Increment{
		{Key: "ck:overflow:ok", Delta: 7, TTL: time.Minute},
		{Key: key, Delta: 5, TTL: time.Minute},
		{Key: "ck:overflow:ok", Delta: 1},
	})
	var be *counter.BatchError
	require.ErrorAs(t, err, &be)
	require.NoError(t, be.Errs[0])
	require.ErrorIs(t, be.Errs[1], counter.ErrOverflow)
	require.NoError(t, be.Errs[2])
	require.Equal(t, []int64{7, 0, 8}, vals)
	e.requireValue(t, key, strconv.FormatInt(math.MaxInt64-1, 10))
	require.EqualValues(t, -1, e.PTTL(t, key))

	bad := "ck:overflow:text"
	e.set(t, bad, "abc")
	_, err = s.IncrementWithExpire(c, bad, 1, time.Minute)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	_, err = s.IncrementUpTo(c, bad, 1, 10, time.Minute)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	_, err = s.DecrementDownTo(c, bad, 1, -10)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	_, err = s.Get(c, bad)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	many, err := s.GetMany(c, []string{"ck:overflow:ok", bad})
	require.ErrorIs(t, err, counter.ErrNotInteger)
	require.Equal(t, counter.Value{N: 8, Exists: true}, many[0])
	e.requireValue(t, bad, "abc")
	require.EqualValues(t, -1, e.PTTL(t, bad))
	hash := "ck:overflow:hash"
	require.NoError(t, e.Raw.Do(c, e.Raw.B().Hset().Key(hash).FieldValue().FieldValue("f", "1").Build()).Error())
	_, err = s.IncrementWithExpire(c, hash, 1, 0)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	_, err = s.IncrementUpTo(c, hash, 1, 10, 0)
	require.ErrorIs(t, err, counter.ErrNotInteger)
	_, err = s.DecrementDownTo(c, hash, 1, 0)
	require.ErrorIs(t, err, luakit.ErrForeignData, "WRONGTYPE is foreign data")
	_, err = s.Get(c, hash)
	require.ErrorIs(t, err, luakit.ErrForeignData)

	// The limit scripts report a foreign value in their reply, never as a forged server error.
	var re *rueidis.RedisError
	_, err = s.IncrementUpTo(c, bad, 1, 10, 0)
	require.ErrorIs(t, err, luakit.ErrForeignData)
	require.False(t, errors.As(err, &re), "limit script forged an error reply: %v", err)
	_, err = s.DecrementDownTo(c, bad, 1, -10)
	require.ErrorIs(t, err, luakit.ErrForeignData)
	require.False(t, errors.As(err, &re), "floor script forged an error reply: %v", err)

	// Strings that look like integers but are not canonical int64s are foreign data for every call,
	// allowed or refused, and stay as they were.
	odd := "ck:overflow:odd"
	for _, v := range []string{"007", "-0", "+1", " 1", "1.5", "", "99999999999999999999",
		"9223372036854775808", "-9223372036854775809", "123456789012345678901"} {
		e.set(t, odd, v)
		for _, call := range []struct {
			name string
			run  func() error
		}{
			{"increment", func() error { _, err := s.IncrementWithExpire(c, odd, 1, 0); return err }},
			{"up-to allowed", func() error { _, err := s.IncrementUpTo(c, odd, 1, math.MaxInt64, 0); return err }},
			{"up-to refused", func() error { _, err := s.IncrementUpTo(c, odd, 1, math.MinInt64, 0); return err }},
			{"down-to allowed", func() error { _, err := s.DecrementDownTo(c, odd, 1, math.MinInt64); return err }},
			{"down-to refused", func() error { _, err := s.DecrementDownTo(c, odd, 1, math.MaxInt64); return err }},
			{"get", func() error { _, err := s.Get(c, odd); return err }},
		} {
			err := call.run()
			require.ErrorIs(t, err, counter.ErrNotInteger, "%s on %q", call.name, v)
			require.ErrorIs(t, err, luakit.ErrForeignData, "%s on %q", call.name, v)
			require.True(t, strings.HasPrefix(err.Error(), "counter: "), "%s: %q", call.name, err)
			require.NotContains(t, err.Error(), odd, "errors never contain keys")
		}
		e.requireValue(t, odd, v)
		require.EqualValues(t, -1, e.PTTL(t, odd))
	}
}

// testBatchOrder: keys without hash tags spread over the Cluster's slots and nodes; BatchIncrement
// and GetMany return results in input order. Also measures BatchIncrement throughput.
func testBatchOrder(t *testing.T, e *env) {
	s := e.store(t, counter.WithKeyPrefix("ck:batch:"))
	c := ctx(t)
	const n = 300
	items := make([]counter.Increment, n)
	keys := make([]string, n)
	slots := map[uint16]bool{}
	for i := range n {
		keys[i] = fmt.Sprintf("k%d", i)
		e.set(t, "ck:batch:"+keys[i], strconv.Itoa(i*1000))
		items[i] = counter.Increment{Key: keys[i], Delta: int64(i + 1), TTL: time.Minute}
		slots[luakit.Slot("ck:batch:"+keys[i])] = true
	}
	if e.IsCluster() {
		require.Greater(t, len(slots), 100, "keys must spread over many slots")
	}
	vals, err := s.BatchIncrement(c, items)
	require.NoError(t, err)
	for i, v := range vals {
		require.EqualValues(t, i*1000+i+1, v, "item %d", i)
	}
	many, err := s.GetMany(c, append([]string{"missing"}, keys...))
	require.NoError(t, err)
	require.Equal(t, counter.Value{}, many[0])
	for i := range n {
		require.Equal(t, counter.Value{N: int64(i*1000 + i + 1), Exists: true}, many[i+1], "key %d", i)
		p := e.PTTL(t, "ck:batch:"+keys[i])
		require.True(t, p > 0 && p <= 60000)
	}

	// Throughput: batches of 100 keys, one goroutine, sequential round trips.
	const batch, rounds = 100, 100
	tp := make([]counter.Increment, batch)
	for i := range tp {
		tp[i] = counter.Increment{Key: fmt.Sprintf("tp%d", i), Delta: 1}
	}
	start := time.Now()
	for range rounds {
		_, err := s.BatchIncrement(c, tp)
		require.NoError(t, err)
	}
	el := time.Since(start)
	t.Logf("BatchIncrement throughput on %s: %d batches of %d keys in %v = %.0f keys/s (%.2f ms per batch, one goroutine)",
		e.Name, rounds, batch, el.Round(time.Millisecond), float64(rounds*batch)/el.Seconds(),
		float64(el.Microseconds())/1000/rounds)
	many, err = s.GetMany(c, []string{"tp0", "tp99"})
	require.NoError(t, err)
	require.Equal(t, []counter.Value{{N: rounds, Exists: true}, {N: rounds, Exists: true}}, many)
}

// testBuffered: concurrent Adds are flushed in the background and on Close; the server ends with the
// exact sum and the flush TTL.
func testBuffered(t *testing.T, e *env) {
	s := e.store(t)
	key := "ck:buffered"
	var flushErrs atomic.Int64
	b, err := counter.NewBuffered(s, key, counter.WithFlushInterval(20*time.Millisecond),
		counter.WithFlushTTL(time.Minute), counter.WithFlushErrorHandler(func(error) { flushErrs.Add(1) }))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				require.NoError(t, b.Add(1))
				if i%500 == 0 {
					time.Sleep(15 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, b.Close(ctx(t)))
	require.Zero(t, b.Pending())
	require.Zero(t, flushErrs.Load())
	e.requireValue(t, key, "16000")
	p := e.PTTL(t, key)
	require.True(t, p > 0 && p <= 60000)
	require.ErrorIs(t, b.Add(1), counter.ErrClosed)
	require.ErrorIs(t, b.Flush(ctx(t)), luakit.ErrClosed, "Flush after Close")
	require.NoError(t, b.Close(ctx(t)), "Close is idempotent")
	e.requireValue(t, key, "16000")
}

// testBoundedConcurrent: 8 goroutines increment through 2 bounded buffered counters (own clients)
// while a sampler reads the global value continuously: no observed value exceeds the limit, exactly
// limit increments are allowed, and after Close the counter holds exactly the limit.
func testBoundedConcurrent(t *testing.T, e *env) {
	const limit = 1000
	key := "ck:bounded"
	bs := make([]*counter.Bounded, 2)
	for i := range bs {
		var err error
		bs[i], err = counter.NewBounded(e.store(t), key, limit, counter.WithChunk(37), counter.WithWindow(time.Minute))
		require.NoError(t, err)
	}
	sampler := e.store(t)
	stop := make(chan struct{})
	var maxSeen, samples atomic.Int64
	sampled := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				sampled <- nil
				return
			default:
			}
			v, err := sampler.Get(context.Background(), key)
			if err != nil {
				sampled <- err
				return
			}
			samples.Add(1)
			if v > maxSeen.Load() {
				maxSeen.Store(v)
			}
		}
	}()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := bs[g%2]
			for {
				ok, err := b.TryAdd(ctx(t), 1)
				if err != nil {
					errs <- err
					return
				}
				if !ok {
					return
				}
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-sampled)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, b := range bs {
		require.NoError(t, b.Close(ctx(t)))
	}
	t.Logf("bounded: %d samples, max observed %d, allowed %d", samples.Load(), maxSeen.Load(), allowed.Load())
	require.LessOrEqual(t, maxSeen.Load(), int64(limit), "an observed global value exceeded the limit")
	require.EqualValues(t, limit, allowed.Load())
	e.requireValue(t, key, strconv.Itoa(limit))
	p := e.PTTL(t, key)
	require.True(t, p > 0 && p <= 60000)

	// Unused headroom goes back on Close: 5 adds with chunk 50 leave 5 on the server.
	b, err := counter.NewBounded(e.store(t), "ck:bounded:giveback", limit, counter.WithChunk(50))
	require.NoError(t, err)
	for range 5 {
		ok, err := b.TryAdd(ctx(t), 1)
		require.NoError(t, err)
		require.True(t, ok)
	}
	e.requireValue(t, "ck:bounded:giveback", "50")
	require.EqualValues(t, 45, b.Headroom())
	require.NoError(t, b.Close(ctx(t)))
	e.requireValue(t, "ck:bounded:giveback", "5")
	require.Zero(t, b.Headroom())
	_, err = b.TryAdd(ctx(t), 1)
	require.ErrorIs(t, err, luakit.ErrClosed, "TryAdd after Close")
	require.ErrorIs(t, b.Flush(ctx(t)), luakit.ErrClosed, "Flush after Close")
	require.NoError(t, b.Close(ctx(t)), "Close is idempotent")
	e.requireValue(t, "ck:bounded:giveback", "5")
}

// errorsIsDisconnected is errors.Is(err, counter.ErrDisconnected), for messages.
func errorsIsDisconnected(err error) bool { return errors.Is(err, counter.ErrDisconnected) }
