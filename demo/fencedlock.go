package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit/fence"
)

// The fenced-lock step's timing. Normal leases are long enough that no critical section outlives
// one (so at most one normal holder exists at a time); the stalled lease is short and the stall is
// twice as long, so the lease surely expires and another worker takes over meanwhile.
const (
	normalTTL  = 2 * time.Second
	stallTTL   = 300 * time.Millisecond
	stallPause = 600 * time.Millisecond
	critical   = time.Millisecond // + up to 1ms jitter
	ledgerLock = "ledger"         // its keys: {ledger}:lease and {ledger}:fence (lock.Keys)
)

// entry is one write to the fenced record.
type entry struct {
	worker int
	round  int
	token  int64
}

// acquisition is one lease a worker held, with the times the hand-off statistics need.
type acquisition struct {
	worker   int
	token    int64
	stalled  bool      // the designated worker's short lease, never released in time
	start    time.Time // Acquire called
	acquired time.Time // Acquire returned
	released time.Time // Release returned (zero for the stalled lease)
}

// fencedLock is the shared state of one run of the step.
type fencedLock struct {
	e      *env
	record fence.Fence[[]entry] // the protected resource: a fenced append-only ledger

	holders    atomic.Int32 // workers inside a normal critical section right now
	maxHolders atomic.Int32
	invalid    atomic.Int32 // normal writes made while the handle no longer vouched for the lease
	normalRej  atomic.Int32 // normal writes the fence rejected (must be 0)
	badRelease atomic.Int32 // normal releases that were not "released"

	mu    sync.Mutex
	acqs  []acquisition
	stall stallOutcome
}

// stallOutcome is what the designated worker saw.
type stallOutcome struct {
	token        int64
	left         time.Duration // the handle's remaining-time estimate right after acquiring
	localErr     error         // the handle's own verdict when the worker woke up (ErrExpired expected)
	recordToken  int64         // the record's highest accepted token just before the late write
	lateAccepted bool
	release      lock.ReleaseOutcome
}

// fencedLockStep: workers, each with its own tracked client, contend (Acquire, waiting without
// polling) for one fenced lock and append to a fenced record. Worker 1 first takes the lock with a
// short TTL and stalls past it (a simulated GC pause); another worker takes over and writes; worker 1
// then tries a late write with its old token, which the fence rejects.
func fencedLockStep(ctx context.Context, e *env) (stepResult, error) {
	s := &fencedLock{e: e}
	clients := make([]rueidis.Client, 0, e.workers)
	defer func() { closeAll(clients) }()
	lockers := make([]*lock.Locker, e.workers)
	for i := range lockers {
		c, _, err := e.trackedClient() // waiters wake on its invalidations: lock finds its tracker
		if err != nil {
			return stepResult{}, fmt.Errorf("client for worker %d: %w", i+1, err)
		}
		clients = append(clients, c)
		if lockers[i], err = lock.New(c, lock.WithKeyPrefix(e.prefix)); err != nil {
			return stepResult{}, err
		}
	}
	defer s.cleanup(ctx, clients[0])

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	stallHeld := make(chan struct{}) // closed once worker 1 holds its short lease: the others start then
	for i, lk := range lockers {
		wg.Go(func() {
			var err error
			if i == 0 {
				err = s.stallThenWork(ctx, lk, stallHeld)
			} else {
				select {
				case <-stallHeld:
					err = s.work(ctx, i, lk)
				case <-ctx.Done():
				}
			}
			if err != nil {
				cancel(fmt.Errorf("worker %d: %w", i+1, err))
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return stepResult{}, err
	}
	return s.report(), nil
}

// stallThenWork is the designated worker: one stalled lease and a late write, then normal rounds.
func (s *fencedLock) stallThenWork(ctx context.Context, lk *lock.Locker, stallHeld chan<- struct{}) error {
	start := time.Now()
	lease, err := lk.Acquire(ctx, ledgerLock, stallTTL)
	if err != nil {
		close(stallHeld)
		return err
	}
	acquired := time.Now()
	// The handle's own estimate of the lease left, reported in the table.
	left := lease.Remaining()
	close(stallHeld)
	token := lease.FencingToken()

	// The process freezes (a GC pause, a VM migration...) right after acquiring: it cannot notice
	// that its lease expired, and a waiter takes over when the server lets the lease go.
	if err := sleep(ctx, stallPause); err != nil {
		return err
	}
	// Make the scenario deterministic: the late write must come after the takeover's write (it does
	// by ~300ms in practice; this only guards a badly overloaded machine).
	for {
		if _, last := s.record.Value(); last > token {
			break
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return fmt.Errorf("no takeover write after the stalled lease expired: %w", err)
		}
	}

	// Awake again, the worker behaves like a buggy client that ignores its handle (lease.Err() says
	// the lease's local estimate elapsed) and writes with its old token anyway. The fence refuses.
	out := stallOutcome{token: token, left: left, localErr: lease.Err()}
	v, last := s.record.Value()
	out.recordToken = last
	out.lateAccepted = s.record.TryWrite(token, append(slices.Clip(v), entry{worker: 1, round: 0, token: token}))
	out.release, err = lease.Release(ctx)
	if err != nil {
		return fmt.Errorf("release of the stalled lease: %w", err)
	}
	s.mu.Lock()
	s.stall = out
	s.acqs = append(s.acqs, acquisition{worker: 1, token: token, stalled: true, start: start, acquired: acquired})
	s.mu.Unlock()
	return s.work(ctx, 0, lk)
}

// work is a normal worker's rounds: wait for the lock, append to the record, release.
func (s *fencedLock) work(ctx context.Context, idx int, lk *lock.Locker) error {
	for r := 1; r <= s.e.rounds; r++ {
		start := time.Now()
		lease, err := lk.Acquire(ctx, ledgerLock, normalTTL)
		if err != nil {
			return err
		}
		acquired := time.Now()
		a := acquisition{worker: idx + 1, token: lease.FencingToken(), start: start, acquired: acquired}

		n := s.holders.Add(1)
		for m := s.maxHolders.Load(); n > m && !s.maxHolders.CompareAndSwap(m, n); m = s.maxHolders.Load() {
		}
		if lease.Err() != nil {
			s.invalid.Add(1)
		}
		v, _ := s.record.Value()
		if !s.record.TryWrite(a.token, append(slices.Clip(v), entry{worker: idx + 1, round: r, token: a.token})) {
			s.normalRej.Add(1)
		}
		time.Sleep(critical + rand.N(time.Millisecond))
		s.holders.Add(-1)

		out, err := lease.Release(ctx)
		a.released = time.Now()
		if err != nil {
			return err
		}
		if out != lock.Released {
			s.badRelease.Add(1)
		}
		s.mu.Lock()
		s.acqs = append(s.acqs, a)
		s.mu.Unlock()
	}
	return nil
}

// cleanup deletes the step's keys (the fence counter outlives every lease), also after a failure.
func (s *fencedLock) cleanup(ctx context.Context, c rueidis.Client) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	leaseKey, fenceKey := lock.Keys(ledgerLock)
	_ = c.Do(ctx, c.B().Del().Key(s.e.prefix+leaseKey, s.e.prefix+fenceKey).Build()).Error()
}

// report computes the table and checks the invariants.
func (s *fencedLock) report() stepResult {
	var res stepResult
	acqs := slices.Clone(s.acqs)
	sort.Slice(acqs, func(i, j int) bool { return acqs[i].token < acqs[j].token })
	normal := s.e.workers * s.e.rounds

	// Hand-offs: consecutive leases (in token order, which is acquisition order) where the next owner
	// was already waiting when the previous owner's Release returned.
	// The other successions are re-acquisitions: the releasing worker (or one that was not yet waiting)
	// called Acquire after the release and won before a waiter's wake-up round trip.
	var handoffs []time.Duration
	var takeover time.Duration
	takeoverBy, retaken := 0, 0
	for i := 1; i < len(acqs); i++ {
		prev, cur := acqs[i-1], acqs[i]
		switch {
		case prev.stalled:
			takeover, takeoverBy = cur.acquired.Sub(prev.start.Add(stallTTL)), cur.worker
		case cur.start.Before(prev.released):
			handoffs = append(handoffs, cur.acquired.Sub(prev.released))
		default:
			retaken++
		}
	}

	distinct := map[int64]bool{}
	for _, a := range acqs {
		distinct[a.token] = true
	}
	value, _ := s.record.Value()
	increasing := true
	for i := 1; i < len(value); i++ {
		if value[i].token <= value[i-1].token {
			increasing = false
		}
	}
	accepted, rejected := s.record.Counts()
	var first, last int64
	if len(acqs) > 0 {
		first, last = acqs[0].token, acqs[len(acqs)-1].token
	}
	st := s.stall

	res.add("workers", "%d (one client each, tracked waits)", s.e.workers)
	res.add("acquisitions", "%d (%d normal, TTL %v + 1 stalled, TTL %v)", len(acqs), normal, normalTTL, stallTTL)
	res.add("tokens issued", "%d distinct, %d..%d, strictly increasing in write order: %v", len(distinct), first, last, increasing)
	res.add("writes accepted", "%d", accepted)
	res.add("stale writes rejected", "%d (token %d: %v pause with %s of lease left; record was at token %d)",
		rejected, st.token, stallPause, ms(st.left), st.recordToken)
	res.add("expiry takeover", "worker %d, %s after the stalled lease's TTL (no release: woke at its PTTL deadline)",
		takeoverBy, ms(takeover))
	res.add("hand-off p50 / p99", "%s / %s (Release returned -> waiting Acquire returned)",
		ms(percentile(handoffs, 0.50)), ms(percentile(handoffs, 0.99)))
	res.add("successions", "%d to a waiter (measured above), %d re-taken by a caller that was not waiting",
		len(handoffs), retaken)

	res.check("at most one holder at a time", s.maxHolders.Load() <= 1 && s.invalid.Load() == 0,
		"max concurrent holders %d, writes under an ended handle %d", s.maxHolders.Load(), s.invalid.Load())
	res.check("every acquisition got a new token", len(distinct) == len(acqs) && len(acqs) == normal+1,
		"%d distinct tokens for %d acquisitions, want %d", len(distinct), len(acqs), normal+1)
	res.check("tokens strictly increase in write order", increasing && len(value) == int(accepted),
		"%d entries in the record", len(value))
	res.check("accepted writes == normal acquisitions", accepted == int64(normal) && s.normalRej.Load() == 0,
		"accepted %d, want %d; normal writes rejected %d", accepted, normal, s.normalRej.Load())
	res.check("exactly the stale write rejected", rejected == 1 && !st.lateAccepted && st.recordToken > st.token,
		"rejected %d, late write with token %d accepted=%v", rejected, st.token, st.lateAccepted)
	res.check("stalled handle knew it had expired", errors.Is(st.localErr, lock.ErrExpired),
		"lease.Err() = %v", st.localErr)
	res.check("releases: normal released, stalled not_owned", s.badRelease.Load() == 0 && st.release == lock.NotOwned,
		"stalled lease release = %v, normal releases not released = %d", st.release, s.badRelease.Load())
	res.summary = fmt.Sprintf("%d acquisitions, %d writes accepted, %d stale rejected, hand-off p50 %s p99 %s",
		len(acqs), accepted, rejected, ms(percentile(handoffs, 0.50)), ms(percentile(handoffs, 0.99)))
	return res
}

// percentile returns the nearest-rank p-quantile of ds (0 for none).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p)) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
