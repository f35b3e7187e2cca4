package idempotency_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/testkit"
)

// proxiedStore returns a Store whose single connection runs through a proxy, warmed (connection open,
// scripts loaded) so that the next dropped reply is a script's.
func proxiedStore(t *testing.T, e *env, name string) (*idempotency.Store, *testkit.Proxy) {
	t.Helper()
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	s, err := idempotency.New(proxy.Client(t, matrix.NoCache))
	require.NoError(t, err)
	warm := "idem:lost:warm:" + name
	a := begin(t, s, warm, long, fpA)
	ok, err := s.Abandon(ctx(t), warm, a.OwnerToken)
	require.NoError(t, err)
	require.True(t, ok)
	a = begin(t, s, warm, long, fpA)
	ok, err = s.Complete(ctx(t), warm, a.OwnerToken, nil, long)
	require.NoError(t, err)
	require.True(t, ok)
	return s, proxy
}

// testLostReplies: a script reaches the server but its reply is dropped. TryBegin, Complete and
// Abandon report ErrUncertain, never success, and are not retried; the server shows what happened.
// The unreturned claim stays pending until its TTL ends, after which a new caller can claim the key;
// the uncertain completion stored its result once. Standalone targets only (the proxy fronts one
// server).
func testLostReplies(t *testing.T, e *env) {
	direct := e.store(t)
	lost := func(t *testing.T, p *testkit.Proxy, op func(ctx context.Context) error) {
		t.Helper()
		require.NoError(t, p.DropReplies())
		cctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := op(cctx)
		cancel()
		require.ErrorIs(t, err, idempotency.ErrUncertain, "a lost reply must be uncertain")
		require.NoError(t, p.Reset())
	}

	// TryBegin: the unreturned claim blocks the key until it expires; then another caller starts.
	s, p := proxiedStore(t, e, "begin")
	lost(t, p, func(c context.Context) error {
		_, err := s.TryBegin(c, "idem:lost:begin", time.Second, fpA)
		return err
	})
	e.requirePending(t, "idem:lost:begin", time.Second)
	requireState(t, begin(t, direct, "idem:lost:begin", long, fpA), idempotency.InProgress)
	e.waitGone(t, "idem:lost:begin")
	requireState(t, begin(t, direct, "idem:lost:begin", long, fpA), idempotency.Started)

	// Complete: applied although reported uncertain; a lookup shows the result, a retry is refused.
	s, p = proxiedStore(t, e, "complete")
	a := begin(t, s, "idem:lost:complete", long, fpA)
	lost(t, p, func(c context.Context) error {
		ok, err := s.Complete(c, "idem:lost:complete", a.OwnerToken, []byte("maybe"), long)
		require.False(t, ok)
		return err
	})
	got := begin(t, direct, "idem:lost:complete", long, fpA)
	requireState(t, got, idempotency.Completed)
	require.Equal(t, []byte("maybe"), got.Result)
	ok, err := direct.Complete(ctx(t), "idem:lost:complete", a.OwnerToken, []byte("again"), long)
	require.NoError(t, err)
	require.False(t, ok, "a completed claim completes once")
	e.requireCompleted(t, "idem:lost:complete", []byte("maybe"), long)

	// Abandon: applied although reported uncertain; the key is free.
	s, p = proxiedStore(t, e, "abandon")
	a = begin(t, s, "idem:lost:abandon", long, fpA)
	lost(t, p, func(c context.Context) error {
		ok, err := s.Abandon(c, "idem:lost:abandon", a.OwnerToken)
		require.False(t, ok)
		return err
	})
	e.requireAbsent(t, "idem:lost:abandon")
	b := begin(t, direct, "idem:lost:abandon", long, fpA)
	requireState(t, b, idempotency.Started)
	require.Greater(t, b.Generation, a.Generation, "generation "+strconv.FormatInt(b.Generation, 10))
}
