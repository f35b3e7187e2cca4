package main

import (
	"context"
	"fmt"
	"slices"
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

// rateLimitStep checks that the workers together were admitted exactly what the policy allows for
// the requests they made, and that every single decision (allowed or not, and every RetryAfter) is the
// one GCRA prescribes.
//
// Why exact: every decision carries its server time (Result.At, whole milliseconds, the clock the
// script decides with), and the server runs the decisions one at a time. Sorting them by server time,
// admissions first within a millisecond (at one instant GCRA's TAT only grows, so once a request is
// rejected every later one of that millisecond is too), reproduces the server's order up to swaps of
// identical outcomes. Replaying GCRA over that sequence (TAT = max(TAT, now) + interval when
// TAT − now ≤ (burst − 1) × interval, otherwise a rejection with RetryAfter = TAT + interval − now −
// burst × interval) gives what the policy allows; nothing depends on local clocks or scheduling. In
// particular a stall of the server or of this process longer than the burst's refill time (500 ms, which
// a loaded machine can cause) lets the TAT fall behind the clock; the replay accounts for that, where
// the closed form burst + floor(span / interval) (shown for reference) holds only while the limit
// stays saturated.
func rateLimitStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()

	policy := ratelimit.GCRA{Burst: rateBurst, EmissionInterval: rateInterval}
	var clients []rueidis.Client
	var limiters []*ratelimit.Limiter
	defer func() {
		for _, l := range limiters {
			_ = l.Close(context.WithoutCancel(ctx))
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
		decisions          []gcraDecision
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
				t.decisions = append(t.decisions, gcraDecision{at: r.At, allowed: r.Allowed, retryAfter: r.RetryAfter})
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
	// Key() is the key as given; the server key has the prefix.
	_ = clients[0].Do(context.WithoutCancel(ctx), clients[0].B().Del().Key(e.prefix+limiters[0].Key()).Build()).Error()

	var (
		admitted, rejected int
		first, last        time.Time
		maxRetry           time.Duration
		badRetry           []time.Duration
		errs               []error
		perWorker          = make([]int, rateWorkers)
		statsMismatch      []string
		decisions          []gcraDecision
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
		decisions = append(decisions, t.decisions...)
		if t.err != nil {
			errs = append(errs, t.err)
		}
		if st := limiters[i].Stats(); st.Granted != int64(t.admitted) || st.Rejected != int64(t.rejected) {
			statsMismatch = append(statsMismatch, fmt.Sprintf("worker %d: stats %d/%d, counted %d/%d",
				i, st.Granted, st.Rejected, t.admitted, t.rejected))
		}
	}
	span := last.Sub(first)
	closedForm := int64(rateBurst) + int64(span/rateInterval)
	replay := replayGCRA(decisions, rateBurst, rateInterval)
	byPolicy := replay.allowed

	res.add("workers", "%d, each with its own client and Limiter on one key", rateWorkers)
	res.add("policy", "GCRA burst %d, emission interval %v (%d/s sustained)", rateBurst, rateInterval, time.Second/rateInterval)
	res.add("run", "%v; a rejected worker sleeps its RetryAfter; each stops at its first rejection after the run", rateRun)
	res.add("admitted", "%d (per worker %v)", admitted, perWorker)
	res.add("allowed by policy", "%d (GCRA replayed over the %d decisions' server times)", byPolicy, len(decisions))
	saturated := "the limit stayed saturated"
	if replay.restarts > 0 {
		saturated = fmt.Sprintf("the TAT fell behind the clock %d time(s): a stall longer than the burst's refill", replay.restarts)
	}
	res.add("closed form", "burst %d + floor(%v from first to last admission / %v) = %d; %s",
		rateBurst, span, rateInterval, closedForm, saturated)
	res.add("rejected", "%d, max RetryAfter %v", rejected, maxRetry)
	res.add("decisions", "%d in %v (%.0f/s)", admitted+rejected, elapsed.Round(time.Millisecond),
		float64(admitted+rejected)/elapsed.Seconds())

	res.check("no errors", len(errs) == 0, "%v", errs)
	res.check("admitted == allowed by policy", int64(admitted) == byPolicy, "admitted %d, policy allows %d", admitted, byPolicy)
	res.check("every decision is GCRA's", replay.mismatched == 0, "%d of %d differ, first: %v",
		replay.mismatched, len(decisions), replay.mismatches)
	res.check("closed form when saturated", replay.restarts > 0 || closedForm == byPolicy,
		"burst + floor(span / interval) = %d, replay %d", closedForm, byPolicy)
	res.check("every RetryAfter in (0, interval]", len(badRetry) == 0 && rejected > 0,
		"max %v, %d outside, %d rejections", maxRetry, len(badRetry), rejected)
	res.check("limiter statistics match", len(statsMismatch) == 0, "%v", statsMismatch)
	res.summary = fmt.Sprintf("%d admitted = %d allowed by GCRA across %d workers, max RetryAfter %v",
		admitted, byPolicy, rateWorkers, maxRetry)
	return res, nil
}

// gcraDecision is one Allow decision as the server reported it.
type gcraDecision struct {
	at         time.Time // Result.At: server time, whole milliseconds
	allowed    bool
	retryAfter time.Duration
}

// gcraReplay is what replaying GCRA over a run's decisions found.
type gcraReplay struct {
	allowed    int64    // requests the policy admits
	restarts   int      // admissions after the first at which the TAT had fallen behind the clock
	mismatches []string // decisions that differ from the policy's (at most 5 described)
	mismatched int
}

// replayGCRA sorts decisions into the server's order (by server time, admissions first within a
// millisecond) and replays GCRA (burst, interval; one permit each, the state absent at the start) over
// them, comparing each outcome and RetryAfter with the policy's.
func replayGCRA(decisions []gcraDecision, burst int64, interval time.Duration) gcraReplay {
	sorted := slices.Clone(decisions)
	slices.SortStableFunc(sorted, func(a, b gcraDecision) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.allowed == b.allowed:
			return 0
		case a.allowed:
			return -1
		}
		return 1
	})
	var out gcraReplay
	capacity := time.Duration(burst) * interval
	var tat time.Time // zero: no state
	for i, d := range sorted {
		now := d.at
		t := tat
		if t.Before(now) {
			if !tat.IsZero() {
				out.restarts++
			}
			t = now
		}
		after := t.Add(interval)
		wantAllowed, wantRetry := true, time.Duration(0)
		if after.Sub(now) > capacity {
			wantAllowed, wantRetry = false, after.Sub(now)-capacity
		} else {
			tat = after
			out.allowed++
		}
		if d.allowed != wantAllowed || d.retryAfter != wantRetry {
			out.mismatched++
			if len(out.mismatches) < 5 {
				out.mismatches = append(out.mismatches, fmt.Sprintf("#%d at %s: allowed %v retry %v, GCRA: allowed %v retry %v",
					i, now.Format("15:04:05.000"), d.allowed, d.retryAfter, wantAllowed, wantRetry))
			}
		}
	}
	return out
}
