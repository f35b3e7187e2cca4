package idempotency_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
)

type scenario = matrix.Scenario[*env]

var scenarios = []scenario{
	{Name: "01_transitions", Run: testTransitions},
	{Name: "02_concurrent_duplicates", Run: testConcurrentDuplicates},
	{Name: "03_stale_owner_after_takeover", Run: testStaleOwner},
	{Name: "04_binary_and_empty_results", Run: testResults},
	{Name: "05_ttl_truncation", Run: testTTLTruncation},
	{Name: "06_nil_vs_empty_fingerprint", Run: testFingerprints},
	{Name: "07_noscript_recovery", Run: testNoScript},
	{Name: "08_resp2_client", Run: testRESP2},
	{Name: "09_key_prefix", Run: testKeyPrefix},
	{Name: "10_begin_waits_for_original", Run: testBeginWaits},
	{Name: "11_uncertain_on_cancel", Run: testUncertain},
	{Name: "12_middleware", Run: testMiddleware},
	{Name: "13_middleware_panics", Run: testMiddlewarePanics},
	{Name: "14_middleware_wait_and_failures", Run: testMiddlewareWaitAndFailures},
	{Name: "15_lost_replies", Run: testLostReplies, StandaloneOnly: true},
	{Name: "16_extend", Run: testExtend},
	{Name: "17_retention_outlives_lease", Run: testRetentionOutlivesLease},
	{Name: "18_keep_alive", Run: testKeepAlive},
	{Name: "19_crashed_owner_frees_after_lease", Run: testCrashedOwner},
	{Name: "20_inspect_changes_nothing", Run: testInspect},
	{Name: "21_one_script_per_operation", Run: testOneRoundTrip},
	{Name: "22_middleware_store_policy", Run: testMiddlewareStorePolicy},
	{Name: "23_middleware_slow_handler_kept_alive", Run: testMiddlewareLeases},
	{Name: "24_middleware_with_ratelimit_both_orders", Run: testMiddlewareOrders},
	{Name: "25_least_privilege_acl", Run: testLeastPrivilege},
	{Name: "26_claim_needs_its_lifecycle", Run: testClaimNeedsItsLifecycle},
	{Name: "27_begin_sleeps_while_held", Run: testBeginSleepsWhileHeld},
	{Name: "28_keep_alive_ends_on_refused_renewal", Run: testKeepAliveRefused},
	{Name: "29_mismatch_lookup_keeps_expiry", Run: testMismatchKeepsExpiry},
}

// TestIdempotency runs every scenario on every target (at most matrix.MaxParallelTargets targets at once).
func TestIdempotency(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		matrix.RunScenarios(t, st, e, scenarios, nil)
	})
}

const long = time.Minute

var (
	fpA = idempotency.FingerprintOf("request-a")
	fpB = idempotency.FingerprintOf("request-b")
)

func begin(t *testing.T, s *idempotency.Store, key string, ttl time.Duration, fp idempotency.Fingerprint) idempotency.Attempt {
	t.Helper()
	a, err := s.TryBegin(ctx(t), key, ttl, fp)
	require.NoError(t, err)
	return a
}

func requireState(t *testing.T, a idempotency.Attempt, want idempotency.State) {
	t.Helper()
	require.Equal(t, want, a.State, "state")
	if want != idempotency.Started {
		require.Empty(t, a.OwnerToken, "only Started reveals the owner token")
	}
	if want != idempotency.Completed {
		require.Nil(t, a.Result, "only Completed reveals the result")
	}
	if want == idempotency.FingerprintMismatch {
		require.Zero(t, a.Generation)
	} else {
		require.Positive(t, a.Generation)
	}
}

// requireForeign asserts that err reports foreign data at the key, with the module's prefix.
func requireForeign(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, idempotency.ErrForeignData)
	require.ErrorIs(t, err, luakit.ErrForeignData)
	require.True(t, strings.HasPrefix(err.Error(), "idempotency: "), "error %q lacks the module prefix", err)
}

// testTransitions: every transition of a claim (absent, pending, completed, foreign data) under
// TryBegin, Complete and Abandon, one row each, asserting the server state it leaves.
func testTransitions(t *testing.T, e *env) {
	s := e.store(t)
	tests := []struct {
		name string
		run  func(t *testing.T, key string)
	}{
		{"absent + begin = started, pending", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			requireState(t, a, idempotency.Started)
			h := e.requirePending(t, key, long)
			require.Equal(t, strconv.FormatInt(a.Generation, 10), h["g"])
			require.Equal(t, "60000", h["x"])
		}},
		{"pending + begin same fp = in progress, expiry unchanged", func(t *testing.T, key string) {
			begin(t, s, key, 10*time.Second, fpA)
			a := begin(t, s, key, long, fpA) // the loser's longer TTL must not change the claim
			requireState(t, a, idempotency.InProgress)
			require.LessOrEqual(t, a.Remaining, 10*time.Second)
			e.requirePending(t, key, 10*time.Second)
		}},
		{"pending + begin other fp = mismatch", func(t *testing.T, key string) {
			begin(t, s, key, long, fpA)
			requireState(t, begin(t, s, key, long, fpB), idempotency.FingerprintMismatch)
			e.requirePending(t, key, long)
		}},
		{"pending + complete by owner = completed, expiry is the retention", func(t *testing.T, key string) {
			a := begin(t, s, key, 3*time.Second, fpA)
			ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("done"), long)
			require.NoError(t, err)
			require.True(t, ok)
			e.requireCompleted(t, key, []byte("done"), long)
			require.Greater(t, e.PTTL(t, key), (3 * time.Second).Milliseconds(), "the retention, not the lease, bounds the result")
			require.Equal(t, "60000", e.hash(t, key)["x"], "x holds the retention")
		}},
		{"completed + complete again = false, first result kept", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("first"), long)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.Complete(ctx(t), key, a.OwnerToken, []byte("second"), long)
			require.NoError(t, err)
			require.False(t, ok)
			e.requireCompleted(t, key, []byte("first"), long)
		}},
		{"pending + complete with another token = false", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			forged := "ffffffffffffffffffffffffffffffff." + strconv.FormatInt(a.Generation, 10)
			ok, err := s.Complete(ctx(t), key, forged, []byte("x"), long)
			require.NoError(t, err)
			require.False(t, ok)
			// The right secret with another generation is rejected too.
			ok, err = s.Complete(ctx(t), key, a.OwnerToken[:33]+strconv.FormatInt(a.Generation+1, 10), []byte("x"), long)
			require.NoError(t, err)
			require.False(t, ok)
			e.requirePending(t, key, long)
		}},
		{"completed + begin same fp = result, expiry unchanged", func(t *testing.T, key string) {
			a := begin(t, s, key, 10*time.Second, fpA)
			_, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), 10*time.Second)
			require.NoError(t, err)
			got := begin(t, s, key, long, fpA)
			requireState(t, got, idempotency.Completed)
			require.Equal(t, []byte("r"), got.Result)
			require.Equal(t, a.Generation, got.Generation)
			e.requireCompleted(t, key, []byte("r"), 10*time.Second)
		}},
		{"completed + begin other fp = mismatch without result", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			_, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("secret result"), long)
			require.NoError(t, err)
			requireState(t, begin(t, s, key, long, fpB), idempotency.FingerprintMismatch)
			e.requireCompleted(t, key, []byte("secret result"), long)
		}},
		{"pending + abandon by owner = absent; begin again = new generation", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			ok, err := s.Abandon(ctx(t), key, a.OwnerToken)
			require.NoError(t, err)
			require.True(t, ok)
			e.requireAbsent(t, key)
			ok, err = s.Complete(ctx(t), key, a.OwnerToken, []byte("late"), long)
			require.NoError(t, err)
			require.False(t, ok, "complete after abandon")
			e.requireAbsent(t, key)
			b := begin(t, s, key, long, fpB)
			requireState(t, b, idempotency.Started)
			require.Greater(t, b.Generation, a.Generation)
		}},
		{"pending + abandon by another token = false", func(t *testing.T, key string) {
			begin(t, s, key, long, fpA)
			ok, err := s.Abandon(ctx(t), key, "00000000000000000000000000000000.1")
			require.NoError(t, err)
			require.False(t, ok)
			e.requirePending(t, key, long)
		}},
		{"completed + abandon = false, result kept", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			_, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("kept"), long)
			require.NoError(t, err)
			ok, err := s.Abandon(ctx(t), key, a.OwnerToken)
			require.NoError(t, err)
			require.False(t, ok)
			e.requireCompleted(t, key, []byte("kept"), long)
		}},
		{"absent + complete or abandon = false, nothing written", func(t *testing.T, key string) {
			tok := "0123456789abcdef0123456789abcdef.1"
			ok, err := s.Complete(ctx(t), key, tok, []byte("x"), long)
			require.NoError(t, err)
			require.False(t, ok)
			ok, err = s.Abandon(ctx(t), key, tok)
			require.NoError(t, err)
			require.False(t, ok)
			e.requireAbsent(t, key)
		}},
		{"foreign hash = ErrForeignData, unchanged", func(t *testing.T, key string) {
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Hset().Key(key).FieldValue().FieldValue("other", "1").Build()).Error())
			_, err := s.TryBegin(ctx(t), key, long, fpA)
			requireForeign(t, err)
			require.Equal(t, map[string]string{"other": "1"}, e.hash(t, key))
		}},
		{"string key = ErrForeignData for every call, unchanged", func(t *testing.T, key string) {
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key(key).Value("v").Build()).Error())
			_, err := s.TryBegin(ctx(t), key, long, fpA)
			requireForeign(t, err)
			_, err = s.Begin(ctx(t), key, long, fpA)
			requireForeign(t, err)
			_, err = s.Complete(ctx(t), key, "0123456789abcdef0123456789abcdef.1", []byte("x"), long)
			requireForeign(t, err)
			_, err = s.Abandon(ctx(t), key, "0123456789abcdef0123456789abcdef.1")
			requireForeign(t, err)
			v, err := e.Raw.Do(ctx(t), e.Raw.B().Get().Key(key).Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, "v", v)
		}},
		{"completed claim with a foreign generation = ErrForeignData", func(t *testing.T, key string) {
			a := begin(t, s, key, long, fpA)
			ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), long)
			require.NoError(t, err)
			require.True(t, ok)
			require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Hset().Key(key).FieldValue().FieldValue("g", "soon").Build()).Error())
			_, err = s.TryBegin(ctx(t), key, long, fpA)
			requireForeign(t, err)
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, "idem:transitions:"+strconv.Itoa(i))
		})
	}
}

// testConcurrentDuplicates: 50 concurrent duplicates over 5 clients → exactly one Started.
func testConcurrentDuplicates(t *testing.T, e *env) {
	stores := make([]*idempotency.Store, 5)
	for i := range stores {
		stores[i] = e.store(t)
	}
	for round := range 3 {
		key := "idem:concurrent:" + strconv.Itoa(round)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			states = map[idempotency.State]int{}
			errs   []error
		)
		start := make(chan struct{})
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a, err := stores[i%len(stores)].TryBegin(ctx(t), key, long, fpA)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				states[a.State]++
			}()
		}
		close(start)
		wg.Wait()
		require.Empty(t, errs)
		require.Equal(t, map[idempotency.State]int{idempotency.Started: 1, idempotency.InProgress: 49}, states)
		e.requirePending(t, key, long)
	}
}

// testStaleOwner: the owner's claim expires, another caller takes over; the stale owner can neither
// complete nor abandon, and the new owner's claim and result stay intact.
func testStaleOwner(t *testing.T, e *env) {
	s := e.store(t)
	key := "idem:stale"
	old := begin(t, s, key, 50*time.Millisecond, fpA)
	requireState(t, old, idempotency.Started)
	e.waitGone(t, key)

	cur := begin(t, s, key, long, fpA)
	requireState(t, cur, idempotency.Started)
	require.Greater(t, cur.Generation, old.Generation, "generations increase across takeovers")

	ok, err := s.Complete(ctx(t), key, old.OwnerToken, []byte("stale"), long)
	require.NoError(t, err)
	require.False(t, ok, "stale owner completed a replacement claim")
	ok, err = s.Abandon(ctx(t), key, old.OwnerToken)
	require.NoError(t, err)
	require.False(t, ok, "stale owner abandoned a replacement claim")
	h := e.requirePending(t, key, long)
	require.Equal(t, strconv.FormatInt(cur.Generation, 10), h["g"])

	ok, err = s.Complete(ctx(t), key, cur.OwnerToken, []byte("fresh"), long)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.Complete(ctx(t), key, old.OwnerToken, []byte("stale"), long)
	require.NoError(t, err)
	require.False(t, ok)
	e.requireCompleted(t, key, []byte("fresh"), long)
	got := begin(t, s, key, long, fpA)
	require.Equal(t, []byte("fresh"), got.Result)
	require.Equal(t, cur.Generation, got.Generation)
}

// testResults: empty, nil and arbitrary binary results round-trip; inputs and outputs are copies.
func testResults(t *testing.T, e *env) {
	s := e.store(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	tests := []struct {
		name   string
		result []byte
		want   []byte
	}{
		{"nil", nil, []byte{}},
		{"empty", []byte{}, []byte{}},
		{"nul", []byte{0}, []byte{0}},
		{"all bytes", all, all},
		{"resp framing", []byte("$-1\r\n*2\r\n:1\r\n_\r\n"), []byte("$-1\r\n*2\r\n:1\r\n_\r\n")},
		{"1 MiB random", big, big},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "idem:results:" + strconv.Itoa(i)
			a := begin(t, s, key, long, fpA)
			in := bytes.Clone(tt.result)
			ok, err := s.Complete(ctx(t), key, a.OwnerToken, in, long)
			require.NoError(t, err)
			require.True(t, ok)
			for j := range in {
				in[j] ^= 0xff // the store copied the input
			}
			got := begin(t, s, key, long, fpA)
			requireState(t, got, idempotency.Completed)
			require.NotNil(t, got.Result)
			require.True(t, bytes.Equal(tt.want, got.Result), "result differs")
			for j := range got.Result {
				got.Result[j] ^= 0xff // the returned slice is the caller's
			}
			again := begin(t, s, key, long, fpA)
			require.True(t, bytes.Equal(tt.want, again.Result), "result changed through a returned slice")
			e.requireCompleted(t, key, tt.want, long)
		})
	}
}

// testTTLTruncation: TTLs are truncated to whole ms; the server's PTTL never exceeds the truncation.
func testTTLTruncation(t *testing.T, e *env) {
	s := e.store(t)
	a := begin(t, s, "idem:ttl:1", time.Second+999*time.Microsecond, fpA)
	requireState(t, a, idempotency.Started)
	h := e.requirePending(t, "idem:ttl:1", time.Second)
	require.Equal(t, "1000", h["x"])

	// 1.9ms is a 1ms claim: its PTTL is at most 1 right away (or it is already gone).
	requireState(t, begin(t, s, "idem:ttl:2", 1900*time.Microsecond, fpA), idempotency.Started)
	require.LessOrEqual(t, e.PTTL(t, "idem:ttl:2"), int64(1))
	e.waitGone(t, "idem:ttl:2")

	for _, bad := range []time.Duration{0, 999 * time.Microsecond, -time.Second} {
		_, err := s.TryBegin(ctx(t), "idem:ttl:3", bad, fpA)
		require.ErrorIs(t, err, idempotency.ErrInvalidTTL)
		require.ErrorIs(t, err, luakit.ErrInvalidTTL)
		require.ErrorIs(t, err, luakit.ErrInvalidConfig, "a bad argument matches luakit.ErrInvalidConfig")
	}
	e.requireAbsent(t, "idem:ttl:3")
}

// testFingerprints: no fingerprint and an empty one are different requests, in both orders.
func testFingerprints(t *testing.T, e *env) {
	s := e.store(t)
	for i, pair := range [][2]idempotency.Fingerprint{
		{idempotency.NoFingerprint, idempotency.FingerprintOf("")},
		{idempotency.FingerprintOf(""), idempotency.NoFingerprint},
	} {
		key := "idem:fp:" + strconv.Itoa(i)
		first, other := pair[0], pair[1]
		a := begin(t, s, key, long, first)
		requireState(t, a, idempotency.Started)
		requireState(t, begin(t, s, key, long, other), idempotency.FingerprintMismatch)
		requireState(t, begin(t, s, key, long, first), idempotency.InProgress)
		ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), long)
		require.NoError(t, err)
		require.True(t, ok)
		requireState(t, begin(t, s, key, long, other), idempotency.FingerprintMismatch)
		got := begin(t, s, key, long, first)
		requireState(t, got, idempotency.Completed)
		require.Equal(t, []byte("r"), got.Result)
	}
}

// testNoScript: after SCRIPT FLUSH every transition reloads its script (EVALSHA → NOSCRIPT → EVAL).
func testNoScript(t *testing.T, e *env) {
	s := e.store(t)
	key := "idem:noscript"
	e.scriptFlush(t)
	a := begin(t, s, key, long, fpA)
	requireState(t, a, idempotency.Started)
	e.scriptFlush(t)
	ok, err := s.Complete(ctx(t), key, a.OwnerToken, []byte("r"), long)
	require.NoError(t, err)
	require.True(t, ok)
	e.scriptFlush(t)
	requireState(t, begin(t, s, key, long, fpA), idempotency.Completed)

	b := begin(t, s, key+":2", long, fpA)
	e.scriptFlush(t)
	ok, err = s.Abandon(ctx(t), key+":2", b.OwnerToken)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireAbsent(t, key+":2")
}

// testRESP2: the same transitions through a RESP2 client, binary and empty results included.
func testRESP2(t *testing.T, e *env) {
	s, err := idempotency.New(e.NewClient(t, nil, resp2))
	require.NoError(t, err)
	for i, result := range [][]byte{{}, {0, 255, '\r', '\n'}} {
		key := "idem:resp2:" + strconv.Itoa(i)
		a := begin(t, s, key, long, fpA)
		requireState(t, a, idempotency.Started)
		requireState(t, begin(t, s, key, long, fpA), idempotency.InProgress)
		requireState(t, begin(t, s, key, long, idempotency.NoFingerprint), idempotency.FingerprintMismatch)
		ok, err := s.Complete(ctx(t), key, a.OwnerToken, result, long)
		require.NoError(t, err)
		require.True(t, ok)
		got := begin(t, s, key, long, fpA)
		requireState(t, got, idempotency.Completed)
		require.Equal(t, result, got.Result)
		e.requireCompleted(t, key, result, long)
	}
	a := begin(t, s, "idem:resp2:abandon", long, fpA)
	ok, err := s.Abandon(ctx(t), "idem:resp2:abandon", a.OwnerToken)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireAbsent(t, "idem:resp2:abandon")
}

// testKeyPrefix: the prefix is applied to the physical key, byte for byte.
func testKeyPrefix(t *testing.T, e *env) {
	s := e.store(t, idempotency.WithKeyPrefix("pfx\x00{app}:"))
	a := begin(t, s, "k", long, fpA)
	requireState(t, a, idempotency.Started)
	e.requirePending(t, "pfx\x00{app}:k", long)
	e.requireAbsent(t, "k")
	ok, err := s.Complete(ctx(t), "k", a.OwnerToken, []byte("r"), long)
	require.NoError(t, err)
	require.True(t, ok)
	e.requireCompleted(t, "pfx\x00{app}:k", []byte("r"), long)
}

// testUncertain: a cancelled context before the reply is reported as ErrUncertain (or the context's
// error), never as success.
func testUncertain(t *testing.T, e *env) {
	s := e.store(t)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.TryBegin(cctx, "idem:uncertain", long, fpA)
	require.Error(t, err)
	require.True(t, errors.Is(err, idempotency.ErrUncertain), "got %v", err)
	require.ErrorIs(t, err, context.Canceled)
	ok, err := s.Complete(cctx, "idem:uncertain", "0123456789abcdef0123456789abcdef.1", nil, long)
	require.False(t, ok)
	require.ErrorIs(t, err, idempotency.ErrUncertain)
}
