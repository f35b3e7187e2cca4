package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/counter"
)

// The quota step: quotaWorkers workers, each with its own client, take units from one shared quota
// counter with IncrementUpTo until it refuses them.
const (
	quotaWorkers = 6
	quotaLimit   = 500
	quotaKey     = "quota:exports"
)

// counterStep runs the shared quota: the workers together must be allowed exactly quotaLimit units,
// every refusal must report the counter at the limit, and the counter must end at the limit.
func counterStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()

	var clients []rueidis.Client
	var stores []*counter.Store
	defer func() {
		for _, s := range stores {
			_ = s.Close(context.WithoutCancel(ctx))
		}
		closeAll(clients)
	}()
	newStore := func() (*counter.Store, error) {
		c, err := rueidis.NewClient(e.option)
		if err != nil {
			return nil, err
		}
		clients = append(clients, c)
		s, err := counter.New(c, counter.WithKeyPrefix(e.prefix))
		if err != nil {
			return nil, err
		}
		stores = append(stores, s)
		return s, nil
	}
	admin, err := newStore()
	if err != nil {
		return res, err
	}
	workers := make([]*counter.Store, quotaWorkers)
	for i := range workers {
		if workers[i], err = newStore(); err != nil {
			return res, err
		}
	}

	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		allowed   = make([]int, quotaWorkers)
		refusedAt []int64
		failures  []error
	)
	start := time.Now()
	for i, s := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := s.IncrementUpTo(ctx, quotaKey, 1, quotaLimit, time.Minute)
				mu.Lock()
				switch {
				case errors.Is(err, counter.ErrDisconnected):
					// A hard quota fails closed: no unit without the counter.
					failures = append(failures, fmt.Errorf("worker %d: %w", i, err))
				case err != nil:
					failures = append(failures, fmt.Errorf("worker %d: %w", i, err))
				case r.Allowed:
					allowed[i]++
				default:
					refusedAt = append(refusedAt, r.Value)
				}
				mu.Unlock()
				if err != nil || !r.Allowed {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	final, err := admin.Get(ctx, quotaKey)
	if err != nil {
		return res, fmt.Errorf("read quota: %w", err)
	}
	// The batch API in the same run: one pipelined round trip for many per-worker usage counters.
	items := make([]counter.Increment, quotaWorkers)
	for i := range items {
		items[i] = counter.Increment{Key: fmt.Sprintf("quota:usage:%d", i), Delta: int64(allowed[i]), TTL: time.Minute}
	}
	usage, berr := admin.BatchIncrement(ctx, items)
	cleanup := make([]string, 0, quotaWorkers+1)
	cleanup = append(cleanup, e.prefix+quotaKey)
	for i := range items {
		cleanup = append(cleanup, e.prefix+items[i].Key)
	}
	_ = clients[0].Do(context.WithoutCancel(ctx), clients[0].B().Del().Key(cleanup...).Build()).Error()

	total := 0
	for _, n := range allowed {
		total += n
	}
	usageSum := int64(0)
	for _, n := range usage {
		usageSum += n
	}
	atLimit := len(refusedAt) == quotaWorkers
	for _, v := range refusedAt {
		atLimit = atLimit && v == quotaLimit
	}

	res.add("workers", "%d, each with its own client", quotaWorkers)
	res.add("limit", "%d units, IncrementUpTo(delta 1), 1m window", quotaLimit)
	res.add("allowed per worker", "%v", allowed)
	res.add("allowed total", "%d in %v (%.0f decisions/s)", total, elapsed.Round(time.Millisecond),
		float64(total+len(refusedAt))/elapsed.Seconds())
	res.add("final counter", "%d", final)
	res.add("per-worker usage", "%v via one BatchIncrement round trip", usage)

	res.check("no errors", len(failures) == 0 && berr == nil, "%v %v", failures, berr)
	res.check("allowed total == limit", total == quotaLimit, "%d allowed, limit %d", total, quotaLimit)
	res.check("final counter == limit", final == quotaLimit, "counter %d, limit %d", final, quotaLimit)
	res.check("every refusal saw the limit", atLimit, "refusals at %v", refusedAt)
	res.check("batch usage adds up", usageSum == int64(total), "usage %d, allowed %d", usageSum, total)
	res.summary = fmt.Sprintf("quota %d/%d exact across %d workers", total, quotaLimit, quotaWorkers)
	return res, nil
}
