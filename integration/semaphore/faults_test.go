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

// TestSemaphoreFaults drops or delays replies with the fault proxy on every standalone target: an
// acquisition whose reply is lost is reported as uncertain (never as success) and its owner-token
// cleanup is retried in the background until it lands; a renewal whose reply is lost keeps the permit
// with its previous estimate; a renewal answered too late surrenders it; the server ends clean.
func TestSemaphoreFaults(t *testing.T) {
	// the proxy drives single servers
	matrix.Run(t, matrix.Select(matrix.Targets(), matrix.Target.Standalone), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		t.Run("uncertain_acquire_is_not_success", func(t *testing.T) { testUncertainAcquire(t, e) })
		t.Run("uncertain_extend_keeps_estimate", func(t *testing.T) { testUncertainExtend(t, e) })
		t.Run("late_extend_reply_surrenders", func(t *testing.T) { testLateExtendReply(t, e) })
	})
}

// proxied returns a Semaphore whose client (also returned) goes through a fault proxy, with a short
// cleanup timeout and a ManualReader on its meter provider.
func proxied(t *testing.T, e *env, key string, capacity int64) (*testkit.Proxy, rueidis.Client, *semaphore.Semaphore, *sdkmetric.ManualReader) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	c := proxy.Client(t, matrix.NoCache)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s := newSem(t, c, key, capacity,
		semaphore.WithCleanupTimeout(200*time.Millisecond),
		semaphore.WithCleanupRetryWindow(20*time.Second),
		semaphore.WithMeterProvider(mp),
		semaphore.WithLogger(slog.New(slog.DiscardHandler)))
	return proxy, c, s, reader
}

func testUncertainAcquire(t *testing.T, e *env) {
	const key = "ck:sem:uncertain-acquire"
	proxy, _, s, reader := proxied(t, e, key, 2)
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
	require.NoError(t, s.Close(sctx))
	require.Empty(t, abandoned(t, reader), "the cleanup must have landed")
	e.requireGone(t, key, 3*time.Second, "key after the uncertain acquisition")
}

// testUncertainExtend loses the reply of a renewal of a permit without expiry to a finite TTL: the
// renewal may have run, so the handle keeps vouching with the lower of its estimates (no longer
// Forever, at most the new TTL from the send), sends nothing else, and the permit stays held; it is
// released normally once replies flow again.
func testUncertainExtend(t *testing.T, e *env) {
	const key = "ck:sem:uncertain-extend"
	proxy, c, s, reader := proxied(t, e, key, 2)
	p, err := s.TryAcquireNoExpiry(ctx(t))
	require.NoError(t, err)
	e.requirePermit(t, key, p, true)
	ok, err := p.ExtendNoExpiry(ctx(t)) // loads the script: the dropped reply is the renewal's
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, proxy.DropReplies())
	ectx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	ok, err = p.ExtendTTL(ectx, time.Minute)
	cancel()
	require.False(t, ok)
	require.ErrorIs(t, err, semaphore.ErrUncertain)
	require.Nil(t, p.Err(), "an uncertain renewal keeps the permit")
	require.Greater(t, p.Remaining(), 50*time.Second)
	require.LessOrEqual(t, p.Remaining(), time.Minute, "the estimate is lowered to the new TTL")
	require.True(t, p.NoExpiry(), "the TTL changes only on a confirmed renewal")
	require.NoError(t, proxy.Reset())
	matrix.WaitServing(t, c)

	e.requirePermit(t, key, p, false) // the renewal ran on the server
	release(t, p, semaphore.Released)
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	require.NoError(t, s.Close(sctx))
	require.Empty(t, abandoned(t, reader), "no cleanup was needed")
	e.requireAbsent(t, key, "key after the release")
}

// testLateExtendReply delays the reply of a renewal to NoExpiry past the permit's local estimate: the
// server applied it (the permit would now live forever) but the handle had already ended, so Extend
// reports false and the handle ends with ErrExpired. The permit must be surrendered (the handle's
// owner-token release, and Close retrying it when its reply is lost too), not left holding capacity
// forever.
func testLateExtendReply(t *testing.T, e *env) {
	const key = "ck:sem:late-extend"
	proxy, c, s, reader := proxied(t, e, key, 1)
	p, err := s.TryAcquire(ctx(t), time.Second)
	require.NoError(t, err)
	ok, err := p.Extend(ctx(t)) // loads the script: the delayed reply is the renewal's
	require.NoError(t, err)
	require.True(t, ok)
	e.requirePermit(t, key, p, false)

	require.NoError(t, proxy.AddLatency(1500*time.Millisecond))
	ok, err = p.ExtendNoExpiry(ctx(t))
	require.NoError(t, err)
	require.False(t, ok, "a renewal answered after the local estimate elapsed is not reported as renewed")
	require.ErrorIs(t, p.Err(), semaphore.ErrExpired, "the handle no longer vouches for the permit")
	require.NoError(t, proxy.Reset())
	matrix.WaitServing(t, c)
	require.NoError(t, p.Close())

	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	require.NoError(t, s.Close(sctx))
	require.Empty(t, abandoned(t, reader), "the cleanup must have landed")
	out, err := p.Release(ctx(t))
	require.NoError(t, err)
	require.Equal(t, semaphore.AlreadyReleased, out, "the answered cleanup settled the permit")
	e.requireAbsent(t, key, "key after the late-renewed permit's cleanup")
}
