package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// The rows of the ack section.
const (
	ackOff   = "off"
	ackWait1 = "WAIT 1"
)

// ackSection measures Coordkit's lock cycle (TryAcquire + Release, one caller) on a primary with one
// replica (testkit.LaunchReplicated of the same target), without the replica acknowledgement and with
// lock.WithReplicaAck(WAIT 1, 1s), rounds alternating: cycles per second, and the p50 and p99 of
// single cycles (r.cfg.handoffs × 10 timed cycles per row and round; medians over the rounds).
func (r *runner) ackSection(ctx context.Context) (*peers.Ack, error) {
	rp, err := testkit.LaunchReplicated(ctx, r.cfg.target)
	if err != nil {
		return nil, err
	}
	defer rp.Close()
	logf(r.out, "ack: primary %s with replica %s (%s %s)", rp.Primary.Addr, rp.Replica.Addr, rp.Primary.Flavor, rp.Primary.Version)
	r.nodes = []*testkit.Server{rp.Primary}
	defer r.cleanup(ctx)
	opt := rp.Primary.ClientOption()
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	lockers := map[string]*lock.Locker{}
	for row, ack := range map[string]luakit.ReplicaAck{ackOff: {}, ackWait1: {Replicas: 1, Timeout: time.Second}} {
		if lockers[row], err = lock.New(c, lock.WithReplicaAck(ack)); err != nil {
			return nil, err
		}
	}
	cycle := func(lk *lock.Locker) op {
		key := r.keyer("ack")
		return func(ctx context.Context, n int64) error {
			l, err := lk.TryAcquire(ctx, key(n), 10*time.Second)
			if err != nil {
				return err
			}
			_, err = l.Release(ctx)
			return err
		}
	}
	rows := []string{ackOff, ackWait1}
	for _, row := range rows {
		if _, err := r.measure(ctx, 1, r.cfg.warmup, cycle(lockers[row])); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	samples := map[string][]peers.Sample{}
	p50s, p99s := map[string][]time.Duration{}, map[string][]time.Duration{}
	timed := r.cfg.handoffs * 10
	for round := range r.cfg.rounds {
		for _, row := range peers.Rotate(rows, round) {
			s, err := r.measure(ctx, 1, r.cfg.duration, cycle(lockers[row]))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", row, err)
			}
			samples[row] = append(samples[row], s)
			f := cycle(lockers[row])
			took := make([]time.Duration, timed)
			for i := range took {
				start := time.Now()
				if err := f(ctx, int64(i)); err != nil {
					return nil, fmt.Errorf("%s: %w", row, err)
				}
				took[i] = time.Since(start)
			}
			slices.Sort(took)
			p50s[row] = append(p50s[row], took[timed/2])
			p99s[row] = append(p99s[row], took[timed*99/100])
		}
		logf(r.out, "ack: round %d/%d done", round+1, r.cfg.rounds)
	}
	res := &peers.Ack{Version: rp.Primary.Version}
	for _, row := range rows {
		res.Rows = append(res.Rows, peers.AckRow{
			Throughput: peers.Summarize("coordkit", row, 1, samples[row]),
			P50:        median(p50s[row]), P99: median(p99s[row]),
		})
	}
	logf(r.out, "\nLock cycle on a primary with one replica (%s %s), one caller: without the acknowledgement and with WAIT 1", rp.Primary.Flavor, rp.Primary.Version)
	logf(r.out, "%-8s %12s %10s %10s %16s %14s", "row", "cycles/s", "p50", "p99", "server cmds/op", "server CPU µs/op")
	for _, row := range res.Rows {
		logf(r.out, "%-8s %12.0f %10v %10v %16.1f %14.1f", row.Keys, row.OpsPerSec, row.P50.Round(time.Microsecond), row.P99.Round(time.Microsecond), row.CommandsPerOp, row.CPUUsecPerOp)
	}
	res.P50Ratio = float64(res.Rows[1].P50) / float64(res.Rows[0].P50)
	logf(r.out, "WAIT 1 / off: p50 %.2f, cycles/s %.2f", res.P50Ratio, peers.Ratio(res.Rows[1].OpsPerSec, res.Rows[0].OpsPerSec))
	return res, nil
}

// median returns the median of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
