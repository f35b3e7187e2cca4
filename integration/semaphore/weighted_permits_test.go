package semaphore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/semaphore"
)

// 18. A permit of weight n holds n units of the capacity as one handle: it is granted only when n
// units are free, counts n against later acquisitions, is renewed, verified and released as one, and
// Inspect lists it n times.
func testWeightedPermits(t *testing.T, e *env) {
	const key = "ck:sem:weighted"
	c := ctx(t)
	client := e.NewClient(t, nil, matrix.NoCache)
	s := newSem(t, client, key, 3)
	heavy, err := s.TryAcquireN(c, 2, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 2, heavy.Weight())
	require.Equal(t, 2, e.permits(t, key), "one member per unit")

	_, err = s.TryAcquireN(c, 2, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired, "2 units asked, 1 free")
	one, err := s.TryAcquire(c, time.Minute)
	require.NoError(t, err, "the last unit")
	require.EqualValues(t, 1, one.Weight())
	_, err = s.TryAcquire(c, time.Minute)
	require.ErrorIs(t, err, semaphore.ErrNotAcquired, "full")

	in, err := s.Inspect(c)
	require.NoError(t, err)
	require.Len(t, in.Permits, 3, "the weight-2 permit is listed twice")
	require.Zero(t, in.Free)

	before := e.members(t, key)
	ok, err := heavy.ExtendTTL(c, 2*time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	after := e.members(t, key)
	renewed := 0
	for m, score := range after {
		if score > before[m] && before[m] > 0 {
			renewed++
		}
	}
	require.Equal(t, 2, renewed, "every unit of the heavy permit is renewed, the other one is not")
	ok, err = heavy.Verify(c)
	require.NoError(t, err)
	require.True(t, ok)

	release(t, heavy, semaphore.Released)
	require.Equal(t, 1, e.permits(t, key), "every unit of the heavy permit is removed")
	again, err := s.TryAcquireN(c, 2, time.Minute)
	require.NoError(t, err, "2 units free again")
	release(t, again, semaphore.Released)
	release(t, one, semaphore.Released)
	e.requireAbsent(t, key, "key at the end")
}
