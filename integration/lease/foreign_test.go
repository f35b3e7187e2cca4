package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
)

// testForeignTypeWithExpiry: a string key with an expiry at the hash key is foreign data, reported
// at once by TryAcquire and Acquire (not ErrNotAcquired, not a wait until ctx ends); nothing written.
func testForeignTypeWithExpiry(t *testing.T, e *env) {
	const key = "foreign:lease:str"
	e.do(t, "SET", key, "x", "PX", "60000")
	t.Cleanup(func() { e.do(t, "DEL", key) })
	before := e.Snapshot(t, key)
	ls := e.leases(t)
	_, err := ls.TryAcquire(matrix.Ctx(t), key, "f", time.Second)
	require.ErrorIs(t, err, lease.ErrForeignData)
	require.NotErrorIs(t, err, lease.ErrNotAcquired)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ls.Acquire(ctx, key, "f", time.Second)
	require.ErrorIs(t, err, lease.ErrForeignData)
	require.NoError(t, ctx.Err(), "Acquire returned on its own")
	require.Equal(t, before, e.Snapshot(t, key))
}
