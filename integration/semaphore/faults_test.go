package semaphore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/semaphore"
	"github.com/coordkit/coordkit/testkit"
)

// TestSemaphoreFaults drops replies with the fault proxy on every standalone target: an acquisition or
// renewal whose reply is lost is reported as uncertain (never as success), the renewal surrenders the
// permit, the owner-token cleanup is retried in the background until it lands, and the server ends
// clean.
func TestSemaphoreFaults(t *testing.T) {
	for _, mt := range matrix.Targets() {
		if mt.Cluster {
			continue // the proxy drives single servers
		}
		t.Run(mt.Name, func(t *testing.T) {
			t.Parallel()
			matrix.TakeSlot(t)
			e := startEnv(t, mt)
			t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { testUncertainAcquire(t, e) })
			t.Run("uncertain_extend_surrenders", func(t *testing.T) { testUncertainExtend(t, e) })
			t.Run("late_extend_reply_surrenders", func(t *testing.T) { testLateExtendReply(t, e) })
		})
	}
}

// proxied returns a Semaphore whose client goes through a fault proxy, with a short cleanup timeout and
// a ManualReader on its meter provider.
func proxied(t *testing.T, e *env, key string, capacity int64) (*testkit.Proxy, *semaphore.Semaphore, *sdkmetric.ManualReader) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	c := proxy.Client(t, func(o *rueidis.ClientOption) { o.DisableCache = true })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := newSem(t, c, key, capacity,
		semaphore.WithCleanupTimeout(200*time.Millisecond),
		semaphore.WithCleanupRetryWindow(20*time.Second),
		semaphore.WithMeterProvider(mp),
		semaphore.WithLogger(slog.New(slog.DiscardHandler)))
	return proxy, s, reader
}

func testUncertainAcquire(t *testing.T, e *env) {
	const key = "ck:sem:uncertain-acquire"
	proxy, s, reader := proxied(t, e, key, 2)
	// Warm the connection and load the script, so the dropped reply is the script's.
	p, err := s.TryAcquire(ctx(t), time.Second)
	require.NoError(t, err)
	release(t, p, semaphore.Released)

	require.NoError(t, proxy.DropReplies())
	actx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	p, err = s.TryAcquire(actx, 2*time.Second)
	cancel()
	require.Nil(t, p)
	require.ErrorIs(t, err, semaphore.ErrUncertain, "a lost reply must be uncertain, got %v", err)
	require.NoError(t, proxy.Reset())

	// The background cleanup lands once replies flow again (or its first attempt already removed the
	// permit); either way the server ends clean, at the latest when the 2 s permit expires.
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	require.NoError(t, s.Shutdown(sctx))
	require.Empty(t, abandoned(t, reader), "the cleanup must have landed")
	e.requireGone(t, key, 3*time.Second, "key after the uncertain acquisition")
}

func testUncertainExtend(t *testing.T, e *env) {
	const key = "ck:sem:uncertain-extend"
	proxy, s, reader := proxied(t, e, key, 2)
	p, err := s.TryAcquire(ctx(t), semaphore.NoExpiry)
	require.NoError(t, err)
	e.requirePermit(t, key, p, true)

	require.NoError(t, proxy.DropReplies())
	ectx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	ok, err := p.Extend(ectx, time.Minute)
	cancel()
	require.False(t, ok)
	require.ErrorIs(t, err, semaphore.ErrUncertain)
	require.True(t, p.IsReleased(), "an Extend that failed after sending surrenders the permit")
	require.Zero(t, p.Remaining())
	require.ErrorIs(t, p.Err(), semaphore.ErrSurrendered)
	ok, err = p.Extend(ctx(t), time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, proxy.Reset())

	// Even a permit without expiry is removed: the owner-token release is retried until it lands.
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	require.NoError(t, s.Shutdown(sctx))
	require.Empty(t, abandoned(t, reader), "the cleanup must have landed")
	e.requireAbsent(t, key, "key after the surrendered permit's cleanup")
}

// testLateExtendReply delays the reply of a renewal to NoExpiry past the permit's local estimate: the
// server applied it (the permit would now live forever) but the handle had already ended, so Extend
// reports false. The permit must then be surrendered and released, not left holding capacity forever.
func testLateExtendReply(t *testing.T, e *env) {
	const key = "ck:sem:late-extend"
	proxy, s, reader := proxied(t, e, key, 1)
	p, err := s.TryAcquire(ctx(t), time.Second)
	require.NoError(t, err)
	ok, err := p.Extend(ctx(t), time.Second) // loads the script: the delayed reply is the renewal's
	require.NoError(t, err)
	require.True(t, ok)
	e.requirePermit(t, key, p, false)

	require.NoError(t, proxy.AddLatency(1500*time.Millisecond))
	ok, err = p.Extend(ctx(t), semaphore.NoExpiry)
	require.NoError(t, err)
	require.False(t, ok, "a renewal answered after the local estimate elapsed is not reported as renewed")
	require.NotNil(t, p.Err(), "the handle no longer vouches for the permit")
	require.True(t, p.IsReleased(), "the late-renewed permit is surrendered")
	require.NoError(t, proxy.Reset())

	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	require.NoError(t, s.Shutdown(sctx))
	require.Empty(t, abandoned(t, reader), "the cleanup must have landed")
	e.requireAbsent(t, key, "key after the late-renewed permit's cleanup")
}
