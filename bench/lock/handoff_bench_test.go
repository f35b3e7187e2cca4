package lockbench

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

const (
	// handoffTTL is the holder's lease TTL in BenchmarkHandoff: a waiter that cannot be woken by the
	// release waits for about this long minus handoffSettle.
	handoffTTL = 500 * time.Millisecond
	// handoffSettle is how long the holder keeps the lease after the waiter started, so that the
	// waiter has made its attempt (and armed tracking) and sleeps when the release comes.
	handoffSettle = 50 * time.Millisecond
)

// BenchmarkHandoff measures the lock hand-off: a holder takes a lease (TTL handoffTTL), a waiter's
// Acquire waits for it, and after handoffSettle the holder releases; one operation is one hand-off, and
// its latency runs from the call to Release to the waiter's Acquire returning. It reports p50-ms and
// p99-ms of that latency, and warnings: the waiting warnings the waiter's Locker logged (one per Locker
// without working tracking). Run it with a fixed count, for example -benchtime=30x.
//
//   - tracked: the waiter's client comes from luakit.NewTrackedClient and its Locker has no option: it
//     wakes on the lease key's invalidation.
//   - untracked: the waiter's client has client-side caching off (DisableCache): no invalidation
//     arrives, so it wakes when the holder's TTL passes.
func BenchmarkHandoff(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*")
	b.Run("tracked", func(b *testing.B) {
		c, err := luakit.NewTrackedClient(s.ClientOption(), luakit.NewTracker())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		runHandoff(b, s, c)
	})
	b.Run("untracked", func(b *testing.B) { runHandoff(b, s, benchkit.NewClient(b, s)) })
}

func runHandoff(b *testing.B, s *testkit.Server, waiterClient rueidis.Client) {
	ctx := context.Background()
	holder, err := lock.New(benchkit.NewClient(b, s))
	if err != nil {
		b.Fatal(err)
	}
	var warnings warnCounter
	waiter, err := lock.New(waiterClient, lock.WithLogger(slog.New(&warnings)))
	if err != nil {
		b.Fatal(err)
	}
	type acquired struct {
		lease *lock.Lease
		err   error
		at    time.Time
	}
	run := strconv.FormatInt(runSeq.Add(1), 10)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		name := "bench:handoff:" + run + ":" + strconv.Itoa(i) // keys {name}:lease, {name}:fence
		h, err := holder.TryAcquire(ctx, name, handoffTTL)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan acquired, 1)
		go func() {
			l, err := waiter.Acquire(ctx, name, handoffTTL)
			done <- acquired{l, err, time.Now()}
		}()
		time.Sleep(handoffSettle)
		start := time.Now()
		if _, err := h.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			b.Fatal(r.err)
		}
		lat = append(lat, r.at.Sub(start))
		if _, err := r.lease.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		i := min(max(int(p*float64(len(lat))+0.999999)-1, 0), len(lat)-1)
		return float64(lat[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(warnings.n.Load()), "warnings")
}

// warnCounter is a slog.Handler counting the records at warning level or above.
type warnCounter struct{ n atomic.Int64 }

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnCounter) Handle(context.Context, slog.Record) error {
	w.n.Add(1)
	return nil
}
func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }
