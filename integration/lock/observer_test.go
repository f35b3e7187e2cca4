package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// attempts is a hook that records what the Locker reports to a luakit.AttemptObserver.
type attempts struct {
	mu   sync.Mutex
	errs []error
}

func (a *attempts) Admit(context.Context, luakit.Operation) (context.Context, luakit.Completion, error) {
	return nil, nil, nil
}

func (a *attempts) ObserveAttempt(_ context.Context, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, err)
}

func (a *attempts) take() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.errs
	a.errs = nil
	return out
}

// testAttemptObserver: a hook that is a luakit.AttemptObserver sees every attempt of a waiting
// Acquire (nil while the lock is held by another owner and when it is won), the error of an attempt
// that ends the wait, and TryAcquire's one attempt.
func testAttemptObserver(t *testing.T, e *env) {
	c := ctx(t)
	rec := &attempts{}
	l := newLocker(t, e.NewClient(t, luakit.NewTracker()), lock.WithHooks(rec))
	ln, _, fk := named("s20:observer")
	holder, err := e.locker(t).TryAcquire(c, ln, 200*time.Millisecond)
	require.NoError(t, err)
	_, err = l.TryAcquire(c, ln, time.Minute)
	require.ErrorIs(t, err, lock.ErrNotAcquired)
	require.Equal(t, []error{nil}, rec.take(), "TryAcquire's one attempt, answered busy")

	won, err := l.Acquire(c, ln, time.Minute)
	require.NoError(t, err)
	got := rec.take()
	require.GreaterOrEqual(t, len(got), 2, "at least one busy attempt and the winning one")
	for i, err := range got {
		require.NoError(t, err, "attempt %d", i)
	}
	release(t, won, lock.Released)
	release(t, holder, lock.NotOwned)

	// A final error ends the wait and is reported as is.
	e.do(t, "SET", fk, "abc")
	_, err = l.Acquire(c, ln, time.Minute)
	requireCounterError(t, err, lock.CounterMalformed)
	got = rec.take()
	require.Len(t, got, 1)
	var ce *lock.CounterError
	require.True(t, errors.As(got[0], &ce), "observed %v", got[0])
	e.do(t, "DEL", fk)
}
