package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/latch"
)

// The latch step: batchWorkers workers each finish one part of a batch and count a latch down once;
// a coordinator waits for the latch on its own client.
const (
	batchWorkers = 8
	batchKey     = "batch:latch"
	batchWork    = 20 * time.Millisecond // + up to 40ms jitter per worker
)

// latchStep runs a batch: the coordinator creates a latch of batchWorkers counts (with an expiry, so
// a crashed run leaves nothing behind), workers join it and count it down after their work, and the
// coordinator's Wait must return nil exactly when the last one did.
func latchStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	var clients []rueidis.Client
	defer func() { closeAll(clients) }()
	newLatches := func() (*latch.Latches, error) {
		c, err := rueidis.NewClient(e.option)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
		return latch.New(c, latch.WithKeyPrefix(e.prefix))
	}
	coord, err := newLatches()
	if err != nil {
		return res, err
	}
	l, err := coord.Create(ctx, batchKey, batchWorkers, latch.WithExpiry(time.Minute))
	if err != nil {
		return res, fmt.Errorf("create latch: %w", err)
	}
	defer func() { _, _ = l.Delete(context.WithoutCancel(ctx)) }()

	var (
		mu        sync.Mutex
		remaining []int64 // what each successful CountDown returned
		failures  []error
		lastDone  time.Time
		wg        sync.WaitGroup
	)
	workers := make([]*latch.Latches, batchWorkers)
	for i := range workers {
		if workers[i], err = newLatches(); err != nil {
			return res, err
		}
	}
	start := time.Now()
	waitDone := make(chan struct{})
	var (
		waitErr error
		waited  time.Duration
	)
	go func() {
		defer close(waitDone)
		waitErr = l.Wait(ctx)
		waited = time.Since(start)
	}()
	for i, ls := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := ls.Join(ctx, batchKey)
			if err == nil {
				time.Sleep(batchWork + time.Duration(rand.IntN(40))*time.Millisecond)
				var n int64
				n, err = j.CountDown(ctx)
				if err == nil {
					mu.Lock()
					remaining = append(remaining, n)
					if n == 0 {
						lastDone = time.Now()
					}
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			failures = append(failures, fmt.Errorf("worker %d: %w", i, err))
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-waitDone

	final, countErr := l.Count(ctx)
	_, lateErr := l.CountDown(ctx) // one signal too many: refused, count unchanged
	after, _ := l.Count(ctx)

	slices.Sort(remaining)
	want := make([]int64, batchWorkers)
	for i := range want {
		want[i] = int64(i)
	}
	var wakeLag time.Duration
	if !lastDone.IsZero() {
		wakeLag = start.Add(waited).Sub(lastDone)
	}
	res.add("batch", "%d workers x 1 count each, coordinator waits on its own client", batchWorkers)
	res.add("countdowns", "%d ok, %d failed", len(remaining), len(failures))
	// The lag is measured from when the last worker saw its CountDown reply; the coordinator's Pub/Sub
	// wake-up can arrive first, so it may be slightly negative.
	res.add("wait", "%v (returned %v after the last countdown's reply)", waited.Round(time.Millisecond), wakeLag.Round(100*time.Microsecond))
	res.add("final count", "%d", final)

	res.check("Wait returned nil", waitErr == nil, "Wait = %v", waitErr)
	res.check("final count 0", countErr == nil && final == 0, "Count = %d, %v", final, countErr)
	res.check("exactly N countdowns", len(remaining) == batchWorkers && len(failures) == 0 && slices.Equal(remaining, want),
		"remaining values %v, failures %v", remaining, errors.Join(failures...))
	res.check("extra countdown refused", errors.Is(lateErr, latch.ErrCompleted) && after == 0, "CountDown = %v, count after %d", lateErr, after)
	res.summary = fmt.Sprintf("%d countdowns, coordinator waited %v", len(remaining), waited.Round(time.Millisecond))
	return res, nil
}
