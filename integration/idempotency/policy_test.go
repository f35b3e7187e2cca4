package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// testMiddlewareStorePolicy: which final responses are stored, per status, with the default policy, a
// custom one and DoNotStore. A stored response is replayed (the handler ran once) with its
// Retry-After; a response not stored leaves no claim (abandoned when the handler returned), so the
// retry runs the handler again.
func testMiddlewareStorePolicy(t *testing.T, e *env) {
	var calls sync.Map // path → *atomic.Int32
	count := func(path string) int32 {
		c, _ := calls.LoadOrStore(path, new(atomic.Int32))
		return c.(*atomic.Int32).Load()
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := calls.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n := c.(*atomic.Int32).Add(1)
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		if r.URL.Query().Get("nostore") != "" {
			assert.True(t, idemhttp.DoNotStore(w), "DoNotStore found the middleware's writer")
		}
		if ra := r.URL.Query().Get("retry"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "run %d", n)
	})
	onlyOK := func(_ *http.Request, status int, h http.Header) bool { return status < 300 && h.Get("X-No") == "" }
	tests := []struct {
		name   string
		query  string
		policy func(*http.Request, int, http.Header) bool
		stored bool
	}{
		{"200 stored", "status=200", nil, true},
		{"201 stored", "status=201", nil, true},
		{"400 stored", "status=400", nil, true},
		{"404 stored", "status=404", nil, true},
		{"422 stored", "status=422", nil, true},
		{"429 not stored", "status=429&retry=3", nil, false},
		{"500 stored", "status=500", nil, true},
		{"502 stored", "status=502", nil, true},
		{"503 not stored", "status=503&retry=5", nil, false},
		{"202 with Retry-After stored and replayed", "status=202&retry=7", nil, true},
		{"500 with Retry-After stored and replayed", "status=500&retry=2", nil, true},
		{"200 DoNotStore", "status=200&nostore=1", nil, false},
		{"500 DoNotStore", "status=500&nostore=1", nil, false},
		{"custom: 200 stored", "status=200", onlyOK, true},
		{"custom: 500 not stored", "status=500", onlyOK, false},
		{"custom: 429 not stored", "status=429", onlyOK, false},
		{"custom: DoNotStore wins", "status=200&nostore=1", func(*http.Request, int, http.Header) bool { return true }, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := "mwpolicy:" + strconv.Itoa(i) + ":"
			s := e.store(t, idempotency.WithKeyPrefix(prefix))
			opts := []idemhttp.Option{idemhttp.WithRetention(long)}
			if tt.policy != nil {
				opts = append(opts, idemhttp.WithStorePolicy(tt.policy))
			}
			srv := server(t, s, handler, opts...)
			path := "/p" + strconv.Itoa(i)
			q, err := url.ParseQuery(tt.query)
			require.NoError(t, err)
			status, _ := strconv.Atoi(q.Get("status"))
			first := send(t, srv, "POST", path+"?"+tt.query, "k", "body")
			requireReply(t, first, status, false)
			require.Equal(t, "run 1", first.body)
			require.Equal(t, q.Get("retry"), first.header.Get("Retry-After"))
			in, err := s.Inspect(ctx(t), idemhttp.ClaimKey("", "POST", path, "k"))
			require.NoError(t, err)
			if tt.stored {
				require.Equal(t, idempotency.Completed, in.State)
				require.Equal(t, long, in.TTL)
			} else {
				require.False(t, in.Exists, "a response not stored leaves no claim: %+v", in)
				require.Empty(t, e.claimKeys(t, prefix))
			}
			again := send(t, srv, "POST", path+"?"+tt.query, "k", "body")
			requireReply(t, again, status, tt.stored)
			require.Equal(t, q.Get("retry"), again.header.Get("Retry-After"), "Retry-After")
			if tt.stored {
				require.Equal(t, "run 1", again.body)
				require.EqualValues(t, 1, count(path))
			} else {
				require.Equal(t, "run 2", again.body)
				require.EqualValues(t, 2, count(path))
			}
		})
	}
}

// testMiddlewareLeases: the middleware's claim lease is kept alive while a slow handler runs (several
// leases): duplicates get 409 throughout and the handler runs once; the claim's generation never
// changes; the response is then kept for the retention, long after the lease.
func testMiddlewareLeases(t *testing.T, e *env) {
	const lease = 900 * time.Millisecond
	var calls atomic.Int32
	release := make(chan struct{})
	var handlerErr atomic.Value
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			handlerErr.Store(context.Cause(r.Context()))
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("slow"))
	})
	prefix := "mwlease:"
	s := e.store(t, idempotency.WithKeyPrefix(prefix))
	srv := server(t, s, handler, idemhttp.WithClaimLease(lease), idemhttp.WithRetention(long))
	ck := idemhttp.ClaimKey("", "POST", "/slow", "s1")

	slow := make(chan reply, 1)
	go func() { slow <- send(t, srv, "POST", "/slow", "s1", "x") }()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 10*time.Second, time.Millisecond)
	first, err := s.Inspect(ctx(t), ck)
	require.NoError(t, err)
	require.Equal(t, idempotency.InProgress, first.State)
	require.Equal(t, lease, first.TTL)
	until := time.Now().Add(4 * lease)
	for time.Now().Before(until) {
		requireReply(t, send(t, srv, "POST", "/slow", "s1", "x"), http.StatusConflict, false)
		in, err := s.Inspect(ctx(t), ck)
		require.NoError(t, err)
		require.Equal(t, idempotency.InProgress, in.State, "the claim is kept alive")
		require.Equal(t, first.Generation, in.Generation, "never re-claimed while the handler runs")
		time.Sleep(30 * time.Millisecond)
	}
	close(release)
	requireReply(t, <-slow, http.StatusCreated, false)
	require.Nil(t, handlerErr.Load(), "the handler's context ended while its claim was kept alive")
	require.EqualValues(t, 1, calls.Load())

	in, err := s.Inspect(ctx(t), ck)
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, in.State)
	require.Equal(t, long, in.TTL)
	require.Greater(t, in.Remaining, lease, "the retention outlives the lease")
	time.Sleep(2 * lease) // past another lease: the result is still replayed
	r := send(t, srv, "POST", "/slow", "s1", "x")
	requireReply(t, r, http.StatusCreated, true)
	require.Equal(t, "slow", r.body)
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, prefix+ck, e.claimKey(t, prefix), "ClaimKey names the physical key under the Store's prefix")

	// A claim lost while the handler runs ends the handler's context with ErrLost.
	lost := make(chan error, 1)
	lsrv := server(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(prefix+idemhttp.ClaimKey("", "POST", "/lost", "l1")).Build()).Error())
		select {
		case <-r.Context().Done():
			lost <- context.Cause(r.Context())
		case <-time.After(20 * time.Second):
			lost <- errors.New("the handler's context did not end")
		}
		w.WriteHeader(http.StatusOK)
	}), idemhttp.WithClaimLease(lease))
	requireReply(t, send(t, lsrv, "POST", "/lost", "l1", ""), http.StatusOK, false)
	require.ErrorIs(t, <-lost, idempotency.ErrLost)
}

// testMiddlewareOrders: idemhttp with ratelimithttp in both orders. The recommended order is rate
// limit outside, idempotency inside: a limited request is answered 429 before any claim is written, so
// nothing is stored and the store is not touched. Idempotency outside works too with the default store
// policy (the inner 429 is not stored and its claim is abandoned), at the cost of a claim and an
// abandon per limited request. In both orders the retry after Retry-After runs the handler and gets
// its real response.
func testMiddlewareOrders(t *testing.T, e *env) {
	for _, rateOutside := range []bool{true, false} {
		t.Run(fmt.Sprintf("rate limit outside=%v", rateOutside), func(t *testing.T) {
			tag := strconv.FormatBool(rateOutside)
			limiter, err := ratelimit.NewKeyed(e.NewClient(t, nil), ratelimit.FixedWindow{Limit: 1, Window: 700 * time.Millisecond},
				ratelimit.WithKeyPrefix("{rl"+tag+"}:"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = limiter.Close(context.Background()) })
			rl, err := ratelimithttp.New(limiter, ratelimithttp.WithKey(func(*http.Request) (string, error) { return "client", nil }),
				ratelimithttp.WithLogger(quiet))
			require.NoError(t, err)
			prefix := "mworder:" + tag + ":"
			s := e.store(t, idempotency.WithKeyPrefix(prefix))
			idem, err := idemhttp.New(s, idemhttp.WithSharedScope(true), idemhttp.WithLogger(quiet))
			require.NoError(t, err)
			var calls atomic.Int32
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, "order %d", n)
			})
			var h http.Handler
			if rateOutside {
				h = rl.Handler(idem.Handler(app))
			} else {
				h = idem.Handler(rl.Handler(app))
			}
			srv := rawServer(t, h)

			requireReply(t, send(t, srv, "POST", "/o", "a", ""), http.StatusCreated, false)
			limited := send(t, srv, "POST", "/o", "b", "")
			requireReply(t, limited, http.StatusTooManyRequests, false)
			require.NotEmpty(t, limited.header.Get("Retry-After"))
			require.EqualValues(t, 1, calls.Load())
			in, err := s.Inspect(ctx(t), idemhttp.ClaimKey("", "POST", "/o", "b"))
			require.NoError(t, err)
			require.False(t, in.Exists, "a 429 leaves no claim and nothing stored")
			require.Len(t, e.claimKeys(t, prefix), 1, "only the admitted request's claim exists")

			// The retry after the window: the handler runs, the response is the real one, then replayed.
			var r reply
			require.Eventually(t, func() bool {
				r = send(t, srv, "POST", "/o", "b", "")
				return r.status != http.StatusTooManyRequests
			}, 20*time.Second, 100*time.Millisecond)
			requireReply(t, r, http.StatusCreated, false)
			require.Equal(t, "order 2", r.body)
			require.EqualValues(t, 2, calls.Load())
			dup := send(t, srv, "POST", "/o", "b", "")
			if rateOutside {
				// The limiter runs first: a replay counts against the limit too (429 within the window).
				require.Contains(t, []int{http.StatusCreated, http.StatusTooManyRequests}, dup.status)
			} else {
				requireReply(t, dup, http.StatusCreated, true)
			}
			if dup.status == http.StatusCreated {
				requireReply(t, dup, http.StatusCreated, true)
				require.Equal(t, "order 2", dup.body)
			}
			require.EqualValues(t, 2, calls.Load(), "a duplicate never runs the handler")
		})
	}
}
