package ratelimit_test

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// limiterKeyedUpdateScenarios returns the scenarios of this file.
func limiterKeyedUpdateScenarios() []scenario {
	return []scenario{
		{Name: "limiter_keyed_update_lazy", Run: testKeyedUpdateLazy},
		{Name: "limiter_keyed_update_composite_list", Run: testKeyedUpdateCompositeList},
		{Name: "limiter_keyed_update_rolling_deploy", Run: testKeyedUpdateRolling},
		{Name: "limiter_keyed_update_old_writer_follows", Run: testKeyedUpdateOldWriter},
		{Name: "limiter_keyed_update_unsigned_state", Run: testKeyedUpdateUnsigned},
		{Name: "limiter_keyed_update_rolling_deploy_http", Run: testKeyedUpdateRollingHTTP},
		{Name: "limiter_keyed_update_burst_only", Run: testKeyedUpdateBurstOnly},
	}
}

// Update visits no key and does no I/O; each key is converted by its first decision afterwards, in
// that one script, by the migration rules (a fixed window keeps its count).
func testKeyedUpdateLazy(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := limKeyed(t, e, ratelimit.FixedWindow{Limit: 3, Window: time.Hour}, ratelimit.WithKeyPrefix(prefix))
	for _, key := range []string{"a", "b"} {
		res, err := k.AllowN(ctx(t), key, 2)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	before := e.dump(t, prefix+"b")
	scripts := engScripts(e.CommandStats(t))
	require.NoError(t, k.SetPolicy(ctx(t), ratelimit.FixedWindow{Limit: 5, Window: 2 * time.Hour}))
	require.Equal(t, scripts, engScripts(e.CommandStats(t)), "Update does no I/O")
	require.Equal(t, ratelimit.FixedWindow{Limit: 5, Window: 2 * time.Hour}, k.Policy())

	res, err := k.AllowN(ctx(t), "a", 3)
	require.NoError(t, err)
	require.True(t, res.Allowed, "count 2 kept, limit 5 applies at once")
	require.Zero(t, res.Remaining)
	require.Equal(t, int64(5), res.Limit)
	require.Equal(t, scripts+1, engScripts(e.CommandStats(t)), "conversion and decision in one script")
	res, err = k.AllowN(ctx(t), "a", 1)
	require.NoError(t, err)
	require.False(t, res.Allowed)

	require.Equal(t, before, e.dump(t, prefix+"b"), "an untouched key is not converted")
	res, err = k.AllowN(ctx(t), "b", 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.Remaining, "a probe decides on the converted state")
	require.Equal(t, before, e.dump(t, prefix+"b"), "a probe stores nothing")
	require.Equal(t, "1", e.dump(t, prefix+"a")["V"], "the version is stored")

	require.ErrorIs(t, k.SetPolicy(ctx(t), ratelimit.GCRA{Burst: 1, EmissionInterval: time.Second}), ratelimit.ErrInvalidUpdate)
	require.ErrorIs(t, k.SetPolicy(ctx(t), ratelimit.FixedWindow{}), ratelimit.ErrInvalidPolicy)
	require.Equal(t, ratelimit.FixedWindow{Limit: 5, Window: 2 * time.Hour}, k.Policy(), "unchanged on error")
}

// A composite's component list may change: components match by kind in order, a new component
// starts at full capacity, and a stored configuration that differs is never ErrConfigMismatch.
func testKeyedUpdateCompositeList(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldP := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 10, Window: time.Hour},
	}}
	newP := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 50, TokensPerPeriod: 1, Period: time.Hour},
		ratelimit.FixedWindow{Limit: 6, Window: time.Hour},
	}}
	k := limKeyed(t, e, oldP, ratelimit.WithKeyPrefix(prefix), ratelimit.WithQueue(10, ratelimit.OldestFirst))
	res, err := k.AllowN(ctx(t), "t", 4)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	// A key with local state (a queue) follows the update too.
	_, err = k.WaitN(ctx(t), "q", 4)
	require.NoError(t, err)
	require.Equal(t, 1, k.KeyCount())

	require.NoError(t, k.SetPolicy(ctx(t), newP))
	for _, key := range []string{"t", "q"} {
		res, err = k.AllowN(ctx(t), key, 0)
		require.NoError(t, err, "key %s", key)
		require.Equal(t, int64(2), res.Remaining, "key %s: the fixed window keeps its count 4 of 6", key)
		require.Equal(t, 1, res.Component)
		res, err = k.AllowN(ctx(t), key, 2)
		require.NoError(t, err)
		require.True(t, res.Allowed)
		res, err = k.AllowN(ctx(t), key, 1)
		require.NoError(t, err)
		require.False(t, res.Allowed, "key %s: 6 admitted in the window", key)
		raw := e.dump(t, prefix+key)
		require.Equal(t, "48", raw["0.t"], "the new bucket started full and paid 2")
		require.Equal(t, "6", raw["1.n"])
	}

	// A Limiter with the new settings reads what the Keyed stored.
	l := e.limiter(t, nil, prefix+"t", newP)
	res, err = l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Zero(t, res.Remaining)
}

// rollAdmit is one admission seen in the rolling deploy: the server time of its decision.
type rollAdmit struct{ at time.Time }

// Two processes share keys during a rolling deploy: the old one (version 0) with a looser GCRA,
// the new one (version 1) with a stricter one. Neither gets an error, and once the new process has
// touched a key, no admission (by either process) exceeds the stricter policy, checked against the
// server times of the decisions.
func testKeyedUpdateRolling(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldP := ratelimit.GCRA{Burst: 20, EmissionInterval: 5 * time.Millisecond}
	newP := ratelimit.GCRA{Burst: 3, EmissionInterval: 50 * time.Millisecond}
	oldK := limKeyed(t, e, oldP, ratelimit.WithKeyPrefix(prefix))
	newK := limKeyed(t, e, newP, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
	keys := []string{"k0", "k1", "k2", "k3"}
	for _, key := range keys {
		_, err := oldK.AllowN(ctx(t), key, 5)
		require.NoError(t, err)
	}
	// The new process touches every key first with a decision that stores (a probe would convert
	// without storing, leaving the old process free to decide under the old policy until the new
	// one's first write): from then on the stored version is 1 and both processes decide by it.
	firstNew := make(map[string]time.Time)
	admits := make(map[string][]rollAdmit)
	for _, key := range keys {
		res, err := newK.AllowN(ctx(t), key, 1)
		require.NoError(t, err)
		firstNew[key] = res.At
		if res.Allowed {
			admits[key] = append(admits[key], rollAdmit{at: res.At})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, k := range []*ratelimit.Keyed{oldK, newK, oldK, newK} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				key := keys[i%len(keys)]
				res, err := k.AllowN(ctx(t), key, 1)
				if !assertNoErr(t, err) {
					return
				}
				if res.Allowed {
					mu.Lock()
					admits[key] = append(admits[key], rollAdmit{at: res.At})
					mu.Unlock()
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, key := range keys {
		a := admits[key]
		sort.Slice(a, func(i, j int) bool { return a[i].at.Before(a[j].at) })
		t0 := firstNew[key]
		for i, x := range a {
			// GCRA(new) from t0 on: at most Burst + elapsed/T admissions by any time (the migrated
			// debt only lowers this).
			allowed := newP.Burst + int64(x.at.Sub(t0)/newP.EmissionInterval)
			require.LessOrEqual(t, int64(i+1), allowed, "key %s: admission %d at +%v", key, i+1, x.at.Sub(t0))
		}
	}
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("decision failed: %v", err)
		return false
	}
	return true
}

// The rule for an old writer: a key stored with a higher version is decided by the stored settings
// (it adopts them, keeping them stored); a key stored with a lower or equal version is converted to
// the writer's own settings.
func testKeyedUpdateOldWriter(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldP := ratelimit.FixedWindow{Limit: 10, Window: time.Hour}
	newP := ratelimit.FixedWindow{Limit: 4, Window: time.Hour}
	oldK := limKeyed(t, e, oldP, ratelimit.WithKeyPrefix(prefix))
	newK := limKeyed(t, e, newP, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
	res, err := oldK.AllowN(ctx(t), "x", 3)
	require.NoError(t, err)
	require.Equal(t, int64(10), res.Limit)
	res, err = newK.AllowN(ctx(t), "x", 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	require.Equal(t, int64(4), res.Limit)
	stored := e.dump(t, prefix+"x")
	require.Equal(t, "1", stored["V"])
	require.Equal(t, "v2|f4/3600000000", stored["S"])

	res, err = oldK.AllowN(ctx(t), "x", 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "the old writer applies the newer stored settings: 4 of 4 used")
	require.Equal(t, int64(4), res.Limit)
	require.Equal(t, stored, e.dump(t, prefix+"x"), "the newer settings stay stored")

	// Equal versions: the latest writer converts the key to its own settings, without an error.
	sameK := limKeyed(t, e, ratelimit.FixedWindow{Limit: 6, Window: time.Hour}, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
	res, err = sameK.AllowN(ctx(t), "x", 2)
	require.NoError(t, err)
	require.True(t, res.Allowed, "count 4 kept, limit 6")
	require.Equal(t, "v2|f6/3600000000", e.dump(t, prefix+"x")["S"])
}

// State stored without a signature (by a Limiter) is taken to
// hold the policy given to NewKeyed: decided as is, and converted from it after an Update. A
// Limiter still reads what a Keyed stored.
func testKeyedUpdateUnsigned(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	p := ratelimit.GCRA{Burst: 10, EmissionInterval: time.Second}
	now := e.serverMillis(t, prefix+"g")
	// A TAT 4 s ahead: 4 permits of debt at 1 s each, stored as a Limiter does (µs, no signature).
	engSeedRaw(t, e, prefix+"g", map[string]string{"": "u" + engI((now+4000)*1000)}, now+4000)
	k := limKeyed(t, e, p, ratelimit.WithKeyPrefix(prefix))
	res, err := k.AllowN(ctx(t), "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(6), res.Remaining, "an unsigned TAT holds NewKeyed's settings")

	require.NoError(t, k.SetPolicy(ctx(t), ratelimit.GCRA{Burst: 10, EmissionInterval: 2 * time.Second}))
	res, err = k.AllowN(ctx(t), "g", 1)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	// The debt (4 permits, a little less by now: up to 8 s) is rescaled to 2 s each, plus the permit
	// taken: 10 s of 20 s at most, 5 permits remain.
	require.Equal(t, int64(5), res.Remaining)
	require.Greater(t, res.Reset, 9*time.Second)
	v := e.dump(t, prefix+"g")[""]
	require.True(t, strings.HasPrefix(v, "u") && strings.HasSuffix(v, "|1|g10/2000000"), "stored %q (µs form)", v)

	l := e.limiter(t, nil, prefix+"g", ratelimit.GCRA{Burst: 10, EmissionInterval: 2 * time.Second})
	res, err = l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Equal(t, int64(5), res.Remaining, "a Limiter reads the signed TAT")
	require.NoError(t, k.Refund(ctx(t), "g", 1))
	res, err = k.AllowN(ctx(t), "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(6), res.Remaining, "a Keyed refunds state stored with its own settings")
}

// The rolling deploy through ratelimithttp: an old and a new process (separate clients, the new one
// with another composite component list and a higher version) serve the same clients. No request is
// answered 503, and once the new process has served a client, the two processes together admit no
// more than the new, stricter policy.
func testKeyedUpdateRollingHTTP(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldP := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.FixedWindow{Limit: 20, Window: time.Hour},
	}}
	newP := ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.SlidingWindow{Limit: 100, Window: time.Hour},
		ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
	}}
	oldRig := newHTTPRig(t, httpKeyed(t, e, nil, oldP, ratelimit.WithKeyPrefix(prefix)), ratelimithttp.WithKey(clientKey))
	newRig := newHTTPRig(t, httpKeyed(t, e, nil, newP, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1)),
		ratelimithttp.WithKey(clientKey))
	clients := []string{"c1", "c2", "c3"}
	for _, c := range clients {
		status, _ := oldRig.get(t, "X-Client", c)
		require.Equal(t, 200, status)
	}
	for _, c := range clients {
		status, _ := newRig.get(t, "X-Client", c)
		require.Equal(t, 200, status, "a stored configuration that differs is converted, not a 503")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := make(map[string]int)
	for _, rig := range []*httpRig{oldRig, newRig, oldRig, newRig} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				c := clients[i%len(clients)]
				req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, rig.srv.URL+"/", nil)
				if !assertNoErr(t, err) {
					return
				}
				req.Header.Set("X-Client", c)
				resp, err := rig.srv.Client().Do(req)
				if !assertNoErr(t, err) {
					return
				}
				_ = resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					mu.Lock()
					ok[c]++
					mu.Unlock()
				case 429:
				default:
					t.Errorf("client %s: status %d", c, resp.StatusCode)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range clients {
		// 2 admitted before the concurrent phase; the new fixed window allows 5 in the hour.
		require.Equal(t, 3, ok[c], "client %s", c)
	}
	require.NotContains(t, oldRig.log.String()+newRig.log.String(), "differs")
}

// A rolling deploy that changes only a GCRA's burst: the new process's first decision on a key is a
// rejection (the old process's debt exceeds the new burst), and that rejection stores the key under
// the new settings and version, so the old process, deciding next, adopts them: no admission by
// either process exceeds the stricter policy from the new process's first decision on.
func testKeyedUpdateBurstOnly(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	oldP := ratelimit.GCRA{Burst: 20, EmissionInterval: 50 * time.Millisecond}
	newP := ratelimit.GCRA{Burst: 3, EmissionInterval: 50 * time.Millisecond}
	oldK := limKeyed(t, e, oldP, ratelimit.WithKeyPrefix(prefix))
	newK := limKeyed(t, e, newP, ratelimit.WithKeyPrefix(prefix), ratelimit.WithPolicyVersion(1))
	res, err := oldK.AllowN(ctx(t), "k", 5) // 250 ms of debt: 5 permits, above the new burst
	require.NoError(t, err)
	require.True(t, res.Allowed)
	res, err = newK.AllowN(ctx(t), "k", 1)
	require.NoError(t, err)
	require.False(t, res.Allowed, "5 permits of debt leave none of a burst of 3")
	t0 := res.At
	v := e.dump(t, prefix+"k")[""]
	require.True(t, strings.HasSuffix(v, "|1|g3/50000"), "the rejection stored the new settings: %q", v)
	var admits []time.Time
	for range 10 {
		res, err := oldK.AllowN(ctx(t), "k", 1)
		require.NoError(t, err)
		require.Equal(t, newP.Burst, res.Limit, "the old process decides by the stored, newer settings")
		if res.Allowed {
			admits = append(admits, res.At)
		}
	}
	for i, at := range admits {
		allowed := newP.Burst + int64(at.Sub(t0)/newP.EmissionInterval)
		require.LessOrEqual(t, int64(i+1), allowed, "admission %d at +%v", i+1, at.Sub(t0))
	}
}
