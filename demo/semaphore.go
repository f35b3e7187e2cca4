package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/semaphore"
)

// The semaphore step: exportWorkers workers, each with its own client, share exportPermits permits of
// one semaphore for an "export" job; each does e.rounds exports.
const (
	exportWorkers = 8
	exportPermits = 4
	exportKey     = "exports:permits"
	exportTTL     = 5 * time.Second      // fallback only: every permit is released long before
	exportWork    = 2 * time.Millisecond // + up to 2ms jitter
	exportBackoff = 2 * time.Millisecond // + up to 3ms jitter, after a refused attempt
)

// semaphoreStep runs the export job: every worker takes a permit (TryAcquire, retrying with a short
// jittered backoff when all permits are out), does a few milliseconds of work while counting the
// concurrent holders, and releases the permit. At most exportPermits holders may ever be seen at once,
// every export must be done, and the key must be gone at the end.
func semaphoreStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	clients := make([]rueidis.Client, 0, exportWorkers+1)
	defer func() { closeAll(clients) }()
	sems := make([]*semaphore.Semaphore, exportWorkers)
	defer func() {
		// Stop background cleanups (none expected) before the clients close.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer scancel()
		for _, s := range sems {
			if s != nil {
				_ = s.Close(sctx)
			}
		}
	}()
	for i := range sems {
		c, err := rueidis.NewClient(e.option)
		if err != nil {
			return res, fmt.Errorf("client for worker %d: %w", i+1, err)
		}
		clients = append(clients, c)
		if sems[i], err = semaphore.New(c, exportKey, exportPermits, semaphore.WithKeyPrefix(e.prefix)); err != nil {
			return res, err
		}
	}
	raw, err := rueidis.NewClient(e.option) // for the final check of the key
	if err != nil {
		return res, err
	}
	clients = append(clients, raw)

	var (
		holders, maxHolders atomic.Int32
		exports, refused    atomic.Int64
		badRelease          atomic.Int64
		wg                  sync.WaitGroup
		mu                  sync.Mutex
		failures            []error
	)
	start := time.Now()
	for i, s := range sems {
		wg.Go(func() {
			for r := 1; r <= e.rounds; r++ {
				p, err := s.TryAcquire(ctx, exportTTL)
				for errors.Is(err, semaphore.ErrNotAcquired) {
					refused.Add(1)
					if err = sleep(ctx, exportBackoff+rand.N(3*time.Millisecond)); err != nil {
						break
					}
					p, err = s.TryAcquire(ctx, exportTTL)
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("worker %d round %d: %w", i+1, r, err))
					mu.Unlock()
					return
				}
				n := holders.Add(1)
				for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
				}
				time.Sleep(exportWork + rand.N(2*time.Millisecond)) // the export
				exports.Add(1)
				holders.Add(-1)
				out, err := p.Release(ctx)
				if err != nil || out != semaphore.Released {
					badRelease.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	pttl, keyErr := raw.Do(ctx, raw.B().Pttl().Key(e.prefix+exportKey).Build()).AsInt64()
	want := int64(exportWorkers * e.rounds)

	res.add("workers", "%d (one client each) sharing %d permits, %d export(s) each", exportWorkers, exportPermits, e.rounds)
	res.add("exports done", "%d in %v", exports.Load(), took.Round(time.Millisecond))
	res.add("max concurrent holders", "%d (capacity %d)", maxHolders.Load(), exportPermits)
	res.add("refused attempts", "%d (retried after %v + up to 3ms jitter)", refused.Load(), exportBackoff)
	res.add("key at the end", "PTTL %d (-2: absent)", pttl)

	res.check("at most 4 holders at a time", maxHolders.Load() <= exportPermits,
		"max concurrent holders %d", maxHolders.Load())
	res.check("every export done", exports.Load() == want && len(failures) == 0,
		"%d of %d, %d worker(s) failed%s", exports.Load(), want, len(failures), firstErr(failures))
	res.check("every permit released", badRelease.Load() == 0, "%d releases not released", badRelease.Load())
	res.check("key absent at the end", keyErr == nil && pttl == -2, "PTTL %d, %v", pttl, keyErr)
	res.summary = fmt.Sprintf("%d exports, max %d of %d permits held at once", exports.Load(), maxHolders.Load(), exportPermits)
	return res, nil
}

// firstErr formats the first of errs for a check's detail ("" for none).
func firstErr(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	return fmt.Sprintf(": %v", errs[0])
}
