package ratelimit_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
)

// limiterConcurrencyScenarios returns the scenarios of this file.
func limiterConcurrencyScenarios() []scenario {
	return []scenario{
		{Name: "limiter_concurrency_fixed_window", Run: testLimiterConcurrency},
	}
}

// 32 goroutines over 4 clients (one Limiter each) hammer one fixed-window key until the server clock
// shows three windows have passed since the first admission. Admissions are grouped into windows by
// their server decision time (Result.At): a window starts at its first admission and covers Window
// milliseconds; the next starts at the first admission at or after its end. No window admits more than
// the limit, every window but the last (cut off when the goroutines stop) admits exactly the limit,
// and the total is within one window of the theoretical maximum (windows × limit).
func testLimiterConcurrency(t *testing.T, e *env) {
	const (
		limit      = 40
		window     = 250 * time.Millisecond
		clients    = 4
		goroutines = 32
	)
	key := e.key(t)
	pol := ratelimit.FixedWindow{Limit: limit, Window: window}
	lims := make([]*ratelimit.Limiter, clients)
	for i := range lims {
		lims[i] = e.limiter(t, e.NewClient(t, nil, matrix.NoCache), key, pol)
	}

	var (
		mu        sync.Mutex
		admitted  []time.Time
		decisions atomic.Int64
		firstAt   atomic.Int64 // Unix ms of the first admission, 0 before
		errs      atomic.Int64
	)
	c := ctx(t)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			l := lims[g%clients]
			for {
				res, err := l.Allow(c)
				if err != nil {
					errs.Add(1)
					return
				}
				decisions.Add(1)
				at := res.At.UnixMilli()
				if res.Allowed {
					firstAt.CompareAndSwap(0, at)
					mu.Lock()
					admitted = append(admitted, res.At)
					mu.Unlock()
				}
				if f := firstAt.Load(); f != 0 && at >= f+3*window.Milliseconds() {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.Zero(t, errs.Load(), "decisions failed")

	slices.SortFunc(admitted, func(a, b time.Time) int { return a.Compare(b) })
	require.NotEmpty(t, admitted)
	var perWindow []int
	var windowStart time.Time
	for i, at := range admitted {
		if i == 0 || !at.Before(windowStart.Add(window)) {
			windowStart = at
			perWindow = append(perWindow, 0)
		}
		perWindow[len(perWindow)-1]++
	}
	total := len(admitted)
	t.Logf("admitted per window %v (limit %d), total %d, %d decisions in %v (%.0f decisions/s)",
		perWindow, limit, total, decisions.Load(), elapsed.Round(time.Millisecond),
		float64(decisions.Load())/elapsed.Seconds())

	require.GreaterOrEqual(t, len(perWindow), 3, "three windows passed on the server clock")
	for i, n := range perWindow {
		require.LessOrEqual(t, n, limit, "window %d admitted more than the limit", i)
		if i < len(perWindow)-1 {
			require.Equal(t, limit, n, "window %d was not filled although 32 goroutines were asking", i)
		}
	}
	maxTotal := len(perWindow) * limit
	require.LessOrEqual(t, total, maxTotal)
	require.GreaterOrEqual(t, total, maxTotal-limit, "total within one window of the theoretical maximum")

	// Every limiter's statistics add up to the decisions made.
	var granted, rejected int64
	for _, l := range lims {
		st := l.Stats()
		granted += st.Granted
		rejected += st.Rejected
	}
	require.Equal(t, int64(total), granted)
	require.Equal(t, decisions.Load(), granted+rejected)
}
