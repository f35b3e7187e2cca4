package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/ratelimit"
)

// The rate-limit step: rateWorkers workers, each with its own client and its own Limiter on one
// shared key (like separate processes), take permits from a GCRA limit for rateRun, each sleeping
// the RetryAfter of a rejection before trying again.
const (
	rateWorkers  = 5
	rateBurst    = 50
	rateInterval = 10 * time.Millisecond
	rateRun      = time.Second
	rateKey      = "ratelimit:api"
)

// rateLimitStep checks that the workers together were admitted exactly what the policy allows over
// the server-time span of the run: burst + floor((last admission − first admission) / interval).
//
// Why exact: GCRA's state is one theoretical arrival time, TAT = first + admitted × interval while
// the limit stays saturated (it never refills completely: that would take a 500ms pause of every
// worker). An admission at server time t needs TAT − t ≤ (burst − 1) × interval, so the last
// admission bounds the count from above; each worker stops only at a rejection after the run's end,
// and the worker that made the last admission was rejected later still, which bounds the count from
// below by the same value. Every time is a server time from Result.At, so the check does not depend
// on local clocks or scheduling.
func rateLimitStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	policy := ratelimit.GCRA{Burst: rateBurst, EmissionInterval: rateInterval}
	var clients []rueidis.Client
	var limiters []*ratelimit.Limiter
	defer func() {
		for _, l := range limiters {
			_ = l.Close()
		}
		closeAll(clients)
	}()
	for range rateWorkers {
		c, err := rueidis.NewClient(e.option)
		if err != nil {
			return res, err
		}
		clients = append(clients, c)
		l, err := ratelimit.New(c, rateKey, policy, ratelimit.WithKeyPrefix(e.prefix))
		if err != nil {
			return res, err
		}
		limiters = append(limiters, l)
	}

	type tally struct {
		admitted, rejected int
		first, last        time.Time // server times of the first and last admission
		maxRetry           time.Duration
		badRetry           []time.Duration // RetryAfter outside (0, interval]
		err                error
	}
	tallies := make([]tally, rateWorkers)
	start := time.Now()
	end := start.Add(rateRun)
	var wg sync.WaitGroup
	for i, l := range limiters {
		wg.Go(func() {
			t := &tallies[i]
			for {
				r, err := l.Allow(ctx)
				if err != nil {
					t.err = fmt.Errorf("worker %d: %w", i, err)
					return
				}
				if r.Allowed {
					t.admitted++
					if t.first.IsZero() || r.At.Before(t.first) {
						t.first = r.At
					}
					if r.At.After(t.last) {
						t.last = r.At
					}
					continue
				}
				t.rejected++
				t.maxRetry = max(t.maxRetry, r.RetryAfter)
				if r.RetryAfter <= 0 || r.RetryAfter > rateInterval {
					t.badRetry = append(t.badRetry, r.RetryAfter)
				}
				if time.Now().After(end) {
					return // the first rejection after the run's end
				}
				select {
				case <-time.After(r.RetryAfter): // honour the server's hint
				case <-ctx.Done():
					t.err = fmt.Errorf("worker %d: %w", i, ctx.Err())
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	_ = clients[0].Do(context.WithoutCancel(ctx), clients[0].B().Del().Key(limiters[0].Key()).Build()).Error()

	var (
		admitted, rejected int
		first, last        time.Time
		maxRetry           time.Duration
		badRetry           []time.Duration
		errs               []error
		perWorker          = make([]int, rateWorkers)
		statsMismatch      []string
	)
	for i, t := range tallies {
		admitted += t.admitted
		rejected += t.rejected
		perWorker[i] = t.admitted
		if !t.first.IsZero() && (first.IsZero() || t.first.Before(first)) {
			first = t.first
		}
		if t.last.After(last) {
			last = t.last
		}
		maxRetry = max(maxRetry, t.maxRetry)
		badRetry = append(badRetry, t.badRetry...)
		if t.err != nil {
			errs = append(errs, t.err)
		}
		if st := limiters[i].Stats(); st.Granted != int64(t.admitted) || st.Rejected != int64(t.rejected) {
			statsMismatch = append(statsMismatch, fmt.Sprintf("worker %d: stats %d/%d, counted %d/%d",
				i, st.Granted, st.Rejected, t.admitted, t.rejected))
		}
	}
	span := last.Sub(first)
	byPolicy := int64(rateBurst) + int64(span/rateInterval)

	res.add("workers", "%d, each with its own client and Limiter on one key", rateWorkers)
	res.add("policy", "GCRA burst %d, emission interval %v (%d/s sustained)", rateBurst, rateInterval, time.Second/rateInterval)
	res.add("run", "%v; a rejected worker sleeps its RetryAfter; each stops at its first rejection after the run", rateRun)
	res.add("admitted", "%d (per worker %v)", admitted, perWorker)
	res.add("allowed by policy", "%d = burst %d + floor(%v server time from first to last admission / %v)",
		byPolicy, rateBurst, span, rateInterval)
	res.add("rejected", "%d, max RetryAfter %v", rejected, maxRetry)
	res.add("decisions", "%d in %v (%.0f/s)", admitted+rejected, elapsed.Round(time.Millisecond),
		float64(admitted+rejected)/elapsed.Seconds())

	res.check("no errors", len(errs) == 0, "%v", errs)
	res.check("admitted == allowed by policy", int64(admitted) == byPolicy, "admitted %d, policy allows %d", admitted, byPolicy)
	res.check("every RetryAfter in (0, interval]", len(badRetry) == 0 && rejected > 0,
		"max %v, %d outside, %d rejections", maxRetry, len(badRetry), rejected)
	res.check("limiter statistics match", len(statsMismatch) == 0, "%v", statsMismatch)
	res.summary = fmt.Sprintf("%d admitted = %d allowed by GCRA across %d workers, max RetryAfter %v",
		admitted, byPolicy, rateWorkers, maxRetry)
	return res, nil
}
