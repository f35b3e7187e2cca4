package ratelimit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// The HTTP middleware against the real server: status codes and the Retry-After, RateLimit-Policy and
// RateLimit fields, checked against the decision the handler (ratelimithttp.ResultFrom) or the
// rejection writer saw, whose times are server times.
// httpMiddlewareScenarios returns the scenarios of this file.
func httpMiddlewareScenarios() []scenario {
	return []scenario{
		{Name: "http_allowed_then_limited", Run: httpAllowedThenLimited},
		{Name: "http_cost_probe_and_above_capacity", Run: httpCostProbeAndAboveCapacity},
		{Name: "http_composite_names_binding", Run: httpCompositeNamesBinding},
		{Name: "http_deny_list", Run: httpDenyList},
		{Name: "http_limiter_failure", Run: httpLimiterFailure},
		{Name: "http_server_paused", Run: httpServerPaused, StandaloneOnly: true},
	}
}

// httpRig is an httptest server running a handler behind the middleware. It records the decisions the
// handler and the rejection writer were given.
type httpRig struct {
	srv      *httptest.Server
	mu       sync.Mutex
	ran      int                // handler runs
	admitted []ratelimit.Result // ResultFrom in the handler, for the runs where it was present
	rejected []ratelimit.Result // decisions given to the rejection writer
	log      *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the server goroutines' logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// httpKeyed returns a Keyed limiter over c (a new client when nil), closed at t.Cleanup.
func httpKeyed(t *testing.T, e *env, c rueidis.Client, p ratelimit.Policy, opts ...ratelimit.KeyedOption) *ratelimit.Keyed {
	t.Helper()
	if c == nil {
		c = e.NewClient(t, nil, matrix.NoCache)
	}
	k, err := ratelimit.NewKeyed(c, p, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

// clientKey names the caller by the X-Client request header.
func clientKey(r *http.Request) (string, error) { return r.Header.Get("X-Client"), nil }

// headerCost takes the cost from the X-Cost request header (1 when absent).
func headerCost(r *http.Request) int64 {
	v := r.Header.Get("X-Cost")
	if v == "" {
		return 1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func newHTTPRig(t *testing.T, k *ratelimit.Keyed, opts ...ratelimithttp.Option) *httpRig {
	t.Helper()
	rig := &httpRig{log: &syncBuffer{}}
	opts = append([]ratelimithttp.Option{
		ratelimithttp.WithLogger(slog.New(slog.NewTextHandler(rig.log, nil))),
		ratelimithttp.WithRejected(func(w http.ResponseWriter, r *http.Request, res ratelimit.Result) {
			rig.mu.Lock()
			rig.rejected = append(rig.rejected, res)
			rig.mu.Unlock()
			ratelimithttp.WriteTooManyRequests(w, r, res)
		}),
	}, opts...)
	mw, err := ratelimithttp.New(k, opts...)
	require.NoError(t, err)
	rig.srv = httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok := ratelimithttp.ResultFrom(r.Context())
		rig.mu.Lock()
		rig.ran++
		if ok {
			rig.admitted = append(rig.admitted, res)
		}
		rig.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})))
	t.Cleanup(rig.srv.Close)
	return rig
}

// get sends one GET with the given request headers (name, value pairs) and returns the status and
// response header.
func (rig *httpRig) get(t *testing.T, headers ...string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, rig.srv.URL+"/", nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rig.srv.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode, resp.Header
}

func (rig *httpRig) counts() (ran, admitted, rejected int) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return rig.ran, len(rig.admitted), len(rig.rejected)
}

func (rig *httpRig) lastAdmitted(t *testing.T) ratelimit.Result {
	t.Helper()
	rig.mu.Lock()
	defer rig.mu.Unlock()
	require.NotEmpty(t, rig.admitted)
	return rig.admitted[len(rig.admitted)-1]
}

func (rig *httpRig) lastRejected(t *testing.T) ratelimit.Result {
	t.Helper()
	rig.mu.Lock()
	defer rig.mu.Unlock()
	require.NotEmpty(t, rig.rejected)
	return rig.rejected[len(rig.rejected)-1]
}

// ceilSec is d in whole seconds rounded up, as the middleware sends it.
func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// requireFields asserts the rate-limit fields of h: policy (RateLimit-Policy) exactly, and RateLimit
// as name;r=<remaining>;t=<ceil(reset)> of res, reset capped by RetryAfter on a rejection ("" name: no
// RateLimit field).
func requireFields(t *testing.T, h http.Header, policy, name string, res ratelimit.Result) {
	t.Helper()
	require.Equal(t, policy, h.Get(ratelimithttp.HeaderRateLimitPolicy), "RateLimit-Policy")
	if name == "" {
		require.Empty(t, h.Values(ratelimithttp.HeaderRateLimit), "RateLimit")
		return
	}
	reset := res.Reset
	if !res.Allowed && res.RetryAfter > 0 {
		reset = min(reset, res.RetryAfter) // a 429's effective window ends no later than its Retry-After
	}
	require.Equal(t, fmt.Sprintf("%q;r=%d;t=%d", name, res.Remaining, ceilSec(reset)),
		h.Get(ratelimithttp.HeaderRateLimit), "RateLimit")
}

// A fixed window of 3 per minute keyed by the default key (the client IP): three requests pass with the
// fields counting down, the fourth is 429 with Retry-After = the window's end rounded up to seconds,
// all computed from the server time of the first admission.
func httpAllowedThenLimited(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	const window = time.Minute
	k := httpKeyed(t, e, nil, ratelimit.FixedWindow{Limit: 3, Window: window}, ratelimit.WithKeyPrefix(prefix))
	rig := newHTTPRig(t, k, ratelimithttp.WithPolicyNames("fixed"))

	var first ratelimit.Result
	for i := range 3 {
		status, h := rig.get(t)
		require.Equal(t, http.StatusOK, status)
		res := rig.lastAdmitted(t)
		if i == 0 {
			first = res
		}
		require.True(t, res.Allowed)
		require.Equal(t, int64(2-i), res.Remaining)
		require.Equal(t, int64(3), res.Limit)
		require.False(t, res.At.IsZero())
		// The window started at the first admission and lasts a minute of server time.
		require.Equal(t, window-res.At.Sub(first.At), res.Reset)
		requireFields(t, h, `"fixed";q=3;w=60`, "fixed", res)
		require.Empty(t, h.Get(ratelimithttp.HeaderRetryAfter))
	}
	require.True(t, e.exists(t, prefix+"127.0.0.1"), "the default key is the client IP")

	status, h := rig.get(t)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "application/problem+json", h.Get("Content-Type"))
	res := rig.lastRejected(t)
	require.False(t, res.Allowed)
	require.Equal(t, ratelimit.ReasonCapacity, res.Reason)
	require.Equal(t, int64(0), res.Remaining)
	wantRetry := window - res.At.Sub(first.At)
	require.Equal(t, wantRetry, res.RetryAfter, "retry at the window's end (server time)")
	require.Positive(t, res.RetryAfter)
	require.Equal(t, strconv.FormatInt(ceilSec(wantRetry), 10), h.Get(ratelimithttp.HeaderRetryAfter))
	requireFields(t, h, `"fixed";q=3;w=60`, "fixed", res)
	ran, _, rejected := rig.counts()
	require.Equal(t, 3, ran, "the rejected request did not reach the handler")
	require.Equal(t, 1, rejected)
}

// GCRA burst 5, 100ms: a negative cost or an empty key is 500 without a decision; a cost-0 probe passes and writes nothing; a cost of 6 (above the burst) is
// 429 without Retry-After or RateLimit field and writes nothing; a cost of 5 takes the whole burst;
// then a cost of 1 is 429 with Retry-After 1 (at most one emission interval, rounded up).
func httpCostProbeAndAboveCapacity(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := httpKeyed(t, e, nil, ratelimit.GCRA{Burst: 5, EmissionInterval: 100 * time.Millisecond},
		ratelimit.WithKeyPrefix(prefix))
	rig := newHTTPRig(t, k, ratelimithttp.WithPolicyNames("gcra"),
		ratelimithttp.WithKey(clientKey), ratelimithttp.WithCost(headerCost))
	const policy = `"gcra";q=5;w=1` // 5 x 100ms = 0.5s, rounded up

	status, _ := rig.get(t, "X-Client", "a", "X-Cost", "-1")
	require.Equal(t, http.StatusInternalServerError, status, "a negative cost is a programming error")
	status, _ = rig.get(t)
	require.Equal(t, http.StatusInternalServerError, status, "an empty key is a programming error")
	ran, _, _ := rig.counts()
	require.Zero(t, ran)

	status, h := rig.get(t, "X-Client", "a", "X-Cost", "0")
	require.Equal(t, http.StatusOK, status)
	res := rig.lastAdmitted(t)
	require.Equal(t, int64(5), res.Remaining)
	requireFields(t, h, policy, "gcra", res)
	require.False(t, e.exists(t, prefix+"a"), "a probe writes nothing")

	status, h = rig.get(t, "X-Client", "a", "X-Cost", "6")
	require.Equal(t, http.StatusTooManyRequests, status)
	res = rig.lastRejected(t)
	require.Zero(t, res.RetryAfter)
	require.True(t, res.At.IsZero(), "decided without the server")
	require.Empty(t, h.Get(ratelimithttp.HeaderRetryAfter))
	requireFields(t, h, policy, "", res)
	require.False(t, e.exists(t, prefix+"a"), "a cost above the burst writes nothing")

	status, h = rig.get(t, "X-Client", "a", "X-Cost", "5")
	require.Equal(t, http.StatusOK, status)
	full := rig.lastAdmitted(t)
	require.Equal(t, int64(0), full.Remaining)
	require.Equal(t, 500*time.Millisecond, full.Reset, "the burst refills in 5 emission intervals")
	requireFields(t, h, policy, "gcra", full)

	status, h = rig.get(t, "X-Client", "a", "X-Cost", "1")
	if status == http.StatusOK {
		// More than one emission interval of server time passed since the burst: admitted fairly.
		res = rig.lastAdmitted(t)
		require.GreaterOrEqual(t, res.At.Sub(full.At), 100*time.Millisecond)
		return
	}
	require.Equal(t, http.StatusTooManyRequests, status)
	res = rig.lastRejected(t)
	require.Equal(t, 100*time.Millisecond-res.At.Sub(full.At), res.RetryAfter, "one emission interval after the burst (server time)")
	require.Equal(t, "1", h.Get(ratelimithttp.HeaderRetryAfter))
	requireFields(t, h, policy, "gcra", res)

}

// Composites: the fields name the binding component, with its own quota and window, whichever
// position it has: for an admission the one with the fewest permits left, for a rejection the one
// the request waits for longest.
func httpCompositeNamesBinding(t *testing.T, e *env) {
	t.Run("second_component_lowest", func(t *testing.T) {
		prefix := e.key(t) + ":"
		k := httpKeyed(t, e, nil, ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 5, Window: time.Minute},
			ratelimit.TokenBucket{Limit: 2, TokensPerPeriod: 1, Period: time.Minute},
		}}, ratelimit.WithKeyPrefix(prefix))
		rig := newHTTPRig(t, k, ratelimithttp.WithPolicyNames("fixed", "bucket"), ratelimithttp.WithKey(clientKey),
			ratelimithttp.WithLegacyHeaders(true))
		// Every component is listed (bucket: ceil(2/1) periods of 1m); RateLimit names the binding one.
		const policy = `"fixed";q=5;w=60, "bucket";q=2;w=120`
		for i := range 2 {
			status, h := rig.get(t, "X-Client", "c")
			require.Equal(t, http.StatusOK, status)
			res := rig.lastAdmitted(t)
			require.Equal(t, 1, res.Component)
			require.Equal(t, int64(1-i), res.Remaining)
			require.Equal(t, int64(2), res.Limit)
			requireFields(t, h, policy, "bucket", res)
			require.Equal(t, "2", h.Get(ratelimithttp.HeaderXRateLimitLimit), "legacy limit: the binding quota")
			require.Equal(t, strconv.FormatInt(res.Remaining, 10), h.Get(ratelimithttp.HeaderXRateLimitRemaining))
			require.NotEmpty(t, h.Get(ratelimithttp.HeaderXRateLimitReset))
		}
		status, h := rig.get(t, "X-Client", "c")
		require.Equal(t, http.StatusTooManyRequests, status)
		res := rig.lastRejected(t)
		require.Equal(t, 1, res.Component)
		require.Positive(t, res.RetryAfter)
		require.Equal(t, strconv.FormatInt(ceilSec(res.RetryAfter), 10), h.Get(ratelimithttp.HeaderRetryAfter))
		requireFields(t, h, policy, "bucket", res)
	})
	t.Run("first_component_lowest", func(t *testing.T) {
		prefix := e.key(t) + ":"
		k := httpKeyed(t, e, nil, ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 2, Window: time.Minute},
			ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
		}}, ratelimit.WithKeyPrefix(prefix))
		// Default names: default.0, default.1.
		rig := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey))
		status, h := rig.get(t, "X-Client", "c")
		require.Equal(t, http.StatusOK, status)
		res := rig.lastAdmitted(t)
		require.Equal(t, 0, res.Component)
		require.Equal(t, int64(1), res.Remaining)
		requireFields(t, h, `"default.0";q=2;w=60, "default.1";q=5;w=5`, "default.0", res)
		require.Empty(t, h.Get(ratelimithttp.HeaderXRateLimitLimit), "legacy fields are opt-in")
	})
	// Both components exhausted, the first (a bucket refilling in a second) listed before the one
	// the request really waits for (an hour's window): the 429 names the hour, whose wait is the
	// Retry-After, not the first of the two with 0 left.
	t.Run("rejection_names_longest_wait", func(t *testing.T) {
		prefix := e.key(t) + ":"
		k := httpKeyed(t, e, nil, ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: time.Second},
			ratelimit.FixedWindow{Limit: 5, Window: time.Hour},
		}}, ratelimit.WithKeyPrefix(prefix))
		rig := newHTTPRig(t, k, ratelimithttp.WithPolicyNames("burst", "hour"), ratelimithttp.WithKey(clientKey))
		for range 5 {
			status, _ := rig.get(t, "X-Client", "c")
			require.Equal(t, http.StatusOK, status)
		}
		status, h := rig.get(t, "X-Client", "c")
		require.Equal(t, http.StatusTooManyRequests, status)
		res := rig.lastRejected(t)
		require.Equal(t, 1, res.Component, "the hour's window binds")
		require.Equal(t, int64(5), res.Limit)
		require.Zero(t, res.Remaining)
		require.Greater(t, res.RetryAfter, 59*time.Minute)
		require.Equal(t, strconv.FormatInt(ceilSec(res.RetryAfter), 10), h.Get(ratelimithttp.HeaderRetryAfter))
		requireFields(t, h, `"burst";q=5;w=5, "hour";q=5;w=3600`, "hour", res)
	})
}

// A deny-listed caller is 429 without Retry-After and without rate-limit fields, and its capacity key
// is never touched; another caller passes.
func httpDenyList(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	c := e.NewClient(t, nil, matrix.NoCache)
	dl, err := denylist.New(c, prefix+"denied")
	require.NoError(t, err)
	t.Cleanup(func() { _ = dl.Close(context.Background()) })
	require.NoError(t, dl.SetDenied(ctx(t), "blocked", true))
	k := httpKeyed(t, e, c, ratelimit.FixedWindow{Limit: 10, Window: time.Minute},
		ratelimit.WithKeyPrefix(prefix), ratelimit.WithKeyedDenyList(dl, nil))
	rig := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey))

	status, h := rig.get(t, "X-Client", "blocked")
	require.Equal(t, http.StatusTooManyRequests, status)
	res := rig.lastRejected(t)
	require.Equal(t, ratelimit.ReasonDenyList, res.Reason)
	require.Empty(t, h.Get(ratelimithttp.HeaderRetryAfter))
	require.Empty(t, h.Get(ratelimithttp.HeaderRateLimitPolicy))
	require.Empty(t, h.Get(ratelimithttp.HeaderRateLimit))
	require.False(t, e.exists(t, prefix+"blocked"), "no capacity touched")

	status, h = rig.get(t, "X-Client", "fine")
	require.Equal(t, http.StatusOK, status)
	requireFields(t, h, `"default";q=10;w=60`, "default", rig.lastAdmitted(t))
	ran, _, _ := rig.counts()
	require.Equal(t, 1, ran)
}

// Limiter failures: a closed client and foreign data at the key. Fail closed answers 503 without
// rate-limit fields and skips the handler; fail open runs the handler without them and without a
// decision in its context. Both log the failure with fail_open.
func httpLimiterFailure(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	requireUnprotected := func(t *testing.T, rig *httpRig, failOpen bool, client string) {
		t.Helper()
		ranBefore, admittedBefore, _ := rig.counts()
		status, h := rig.get(t, "X-Client", client)
		ran, admitted, rejected := rig.counts()
		require.Zero(t, rejected)
		require.Equal(t, admittedBefore, admitted, "no decision in the context")
		require.Empty(t, h.Get(ratelimithttp.HeaderRateLimitPolicy))
		require.Empty(t, h.Get(ratelimithttp.HeaderRateLimit))
		require.Empty(t, h.Get(ratelimithttp.HeaderRetryAfter))
		if failOpen {
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, ranBefore+1, ran, "fail open runs the handler")
		} else {
			require.Equal(t, http.StatusServiceUnavailable, status)
			require.Equal(t, ranBefore, ran, "fail closed skips the handler")
			require.Equal(t, "application/problem+json", h.Get("Content-Type"))
		}
		require.Contains(t, rig.log.String(), "rate limiter unavailable")
		require.Contains(t, rig.log.String(), fmt.Sprintf("fail_open=%v", failOpen))
	}

	t.Run("foreign_data", func(t *testing.T) {
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Lpush().Key(prefix+"list").Element("x").Build()).Error())
		k := httpKeyed(t, e, nil, ratelimit.GCRA{Burst: 5, EmissionInterval: time.Second}, ratelimit.WithKeyPrefix(prefix))
		for _, open := range []bool{false, true} {
			rig := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithFailOpen(open))
			requireUnprotected(t, rig, open, "list")
		}
		v, err := e.Raw.Do(ctx(t), e.Raw.B().Lrange().Key(prefix+"list").Start(0).Stop(-1).Build()).AsStrSlice()
		require.NoError(t, err)
		require.Equal(t, []string{"x"}, v, "the foreign value is untouched")
	})
	t.Run("closed_client", func(t *testing.T) {
		// rueidis can revive a connection whose dial was in flight at Close (and a cluster client closes
		// its node connections in goroutines): the guard makes every command after Close fail at once.
		c := luakit.GuardClose(e.NewClient(t, nil, matrix.NoCache))
		k := httpKeyed(t, e, c, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, ratelimit.WithKeyPrefix(prefix))
		c.Close()
		require.Error(t, c.Do(ctx(t), c.B().Get().Key(prefix+"x").Build()).Error(), "the closed client refuses commands")
		for _, open := range []bool{false, true} {
			rig := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithFailOpen(open))
			requireUnprotected(t, rig, open, "x")
		}
	})
}

// A paused (unresponsive) server: with WithTimeout the decision fails after the bound and the fail
// mode answers (503 closed, handler open); after the server resumes, requests are decided again.
func httpServerPaused(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	k := httpKeyed(t, e, nil, ratelimit.GCRA{Burst: 100, EmissionInterval: time.Millisecond}, ratelimit.WithKeyPrefix(prefix))
	closed := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithTimeout(300*time.Millisecond))
	open := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithTimeout(300*time.Millisecond),
		ratelimithttp.WithFailOpen(true))

	status, _ := closed.get(t, "X-Client", "p")
	require.Equal(t, http.StatusOK, status)

	e.Srv.MustPause(t)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			e.Srv.MustResume(t)
		}
	}
	defer resume()

	status, h := closed.get(t, "X-Client", "p")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Empty(t, h.Get(ratelimithttp.HeaderRateLimitPolicy))
	require.Contains(t, closed.log.String(), "fail_open=false")

	status, h = open.get(t, "X-Client", "p")
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, h.Get(ratelimithttp.HeaderRateLimitPolicy))
	ran, admitted, _ := open.counts()
	require.Equal(t, 1, ran)
	require.Zero(t, admitted, "ran unprotected")
	require.Contains(t, open.log.String(), "fail_open=true")

	resume()
	matrix.WaitServing(t, e.Raw)
	status, h = closed.get(t, "X-Client", "p")
	require.Equal(t, http.StatusOK, status)
	require.NotEmpty(t, h.Get(ratelimithttp.HeaderRateLimit))
}
