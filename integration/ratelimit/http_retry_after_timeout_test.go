package ratelimit_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// httpRetryAfterTimeoutScenarios returns the scenarios of this file.
func httpRetryAfterTimeoutScenarios() []scenario {
	return []scenario{
		{Name: "http_retry_after_not_before_effective_window", Run: httpRetryAfterWindow},
		{Name: "http_timeout_keeps_connection", Run: httpTimeoutKeepsConnection},
	}
}

// limitFieldT returns the "t" parameter of a RateLimit field value "name";r=<r>;t=<t>.
func limitFieldT(t *testing.T, field string) int64 {
	t.Helper()
	i := strings.Index(field, ";t=")
	require.GreaterOrEqual(t, i, 0, "RateLimit %q has no t parameter", field)
	v, err := strconv.ParseInt(field[i+len(";t="):], 10, 64)
	require.NoError(t, err, "RateLimit %q", field)
	return v
}

// draft-ietf-httpapi-ratelimit-headers (section 6, Server Behavior): when a response carries both
// Retry-After and RateLimit, Retry-After SHOULD NOT reference a point in time earlier than the end of
// the effective window "t". For policies that refill gradually (token bucket, GCRA, sliding window,
// composites of them) the time to full capacity (Result.Reset) is longer than the time until the
// rejected request could pass (Result.RetryAfter); the 429 must then not announce a longer effective
// window than its Retry-After. (A sliding window exhausted in one segment refills at once, so it has
// no such gap and is not a case here.) Every limit is exhausted by one request, then a second one is rejected;
// the windows are minutes long, so no refill happens between the two on a slow machine.
func httpRetryAfterWindow(t *testing.T, e *env) {
	cases := []struct {
		name   string
		policy ratelimit.Policy
		cost   string // of the exhausting request
	}{
		{"token_bucket", ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Minute}, "4"},
		{"gcra", ratelimit.GCRA{Burst: 4, EmissionInterval: time.Minute}, "4"},
		{"composite", ratelimit.Composite{Components: []ratelimit.Component{
			ratelimit.FixedWindow{Limit: 100, Window: time.Hour},
			ratelimit.TokenBucket{Limit: 4, TokensPerPeriod: 1, Period: time.Minute},
		}}, "4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prefix := e.key(t) + ":"
			k := httpKeyed(t, e, nil, tc.policy, ratelimit.WithKeyPrefix(prefix))
			rig := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithCost(headerCost))

			status, h := rig.get(t, "X-Client", "c", "X-Cost", tc.cost)
			require.Equal(t, http.StatusOK, status)
			allowed := rig.lastAdmitted(t)
			require.Zero(t, allowed.Remaining)
			require.Equal(t, ceilSec(allowed.Reset), limitFieldT(t, h.Get(ratelimithttp.HeaderRateLimit)),
				"an allowed response announces the time to full capacity")

			status, h = rig.get(t, "X-Client", "c", "X-Cost", "1")
			require.Equal(t, http.StatusTooManyRequests, status)
			res := rig.lastRejected(t)
			require.Positive(t, res.RetryAfter)
			require.Greater(t, res.Reset, res.RetryAfter, "the policy refills gradually")
			retryAfter, err := strconv.ParseInt(h.Get(ratelimithttp.HeaderRetryAfter), 10, 64)
			require.NoError(t, err)
			require.Equal(t, ceilSec(res.RetryAfter), retryAfter, "Retry-After rounded up")
			field := h.Get(ratelimithttp.HeaderRateLimit)
			require.GreaterOrEqual(t, retryAfter, limitFieldT(t, field),
				"Retry-After %d is before the end of the effective window (RateLimit: %s)", retryAfter, field)
			require.Equal(t, ceilSec(res.RetryAfter), limitFieldT(t, field),
				"the 429's effective window ends when the request could pass")
		})
	}
}

// A decision cut off by WithTimeout fails alone: the client's connection, which other requests'
// decisions share, stays open. The server holds every script (CLIENT PAUSE WRITE); a request through a
// middleware with a 1 s bound is the first command on a fresh client and answers 503; a request
// through a middleware without a bound, sent meanwhile on the same client (it cannot be observed on the
// server: it waits behind the first in the connection), is decided (200) once the server resumes. (A deadline on the wire would make rueidis send the first command synchronously with
// a socket deadline and close the connection at it, failing the other request too.)
func httpTimeoutKeepsConnection(t *testing.T, e *env) {
	prefix := e.key(t) + ":"
	c := e.NewClient(t, nil, matrix.NoCache)
	k := httpKeyed(t, e, c, ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, ratelimit.WithKeyPrefix(prefix))
	bounded := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey), ratelimithttp.WithTimeout(time.Second))
	unbounded := newHTTPRig(t, k, ratelimithttp.WithKey(clientKey))

	unpause := denyPauseWrites(t, e, prefix+"k")
	type answer struct {
		status int
		h      http.Header
	}
	first := make(chan answer, 1)
	go func() {
		status, h := bounded.get(t, "X-Client", "k")
		first <- answer{status, h}
	}()
	waitScriptsHeld(t, e, prefix+"k", 1)
	second := make(chan answer, 1)
	go func() {
		status, h := unbounded.get(t, "X-Client", "k")
		second <- answer{status, h}
	}()
	a := <-first
	require.Equal(t, http.StatusServiceUnavailable, a.status, "the bounded decision timed out")
	unpause()
	b := <-second
	require.Equal(t, http.StatusOK, b.status, "the other decision on the same connection was not failed by the timeout; log: %s", unbounded.log.String())
}
