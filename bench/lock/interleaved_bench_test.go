package lockbench

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	contenderpkg "github.com/coordkit/coordkit/bench/internal/contenders"
)

// interleavedRounds is how many rounds BenchmarkCycleInterleaved runs per caller count.
const interleavedRounds = 5

// BenchmarkCycleInterleaved compares Coordkit's TryAcquire+Release with the raw ceiling on one
// server in interleaved rounds (the order alternating), so that load from other processes falls on
// both alike: for 1, 8 and 64 callers (goroutines on one client each), each round runs b.N cycles
// of each contender on fresh keys. It reports the median cycles/s of each and coordkit/raw, the
// median of the per-round ratios. Run it with a count, for example -benchtime=3000x.
func BenchmarkCycleInterleaved(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "{bench:*")
	specs := []contenderpkg.Lock{newContender(b, lockSpec(b, contenderpkg.Coordkit), s), newContender(b, lockSpec(b, contenderpkg.RawRueidis), s)}
	for _, callers := range []int{1, 8, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			rates := make([][]float64, len(specs))
			var ratios []float64
			for round := range interleavedRounds {
				r := make([]float64, len(specs))
				for k := range specs {
					j := (k + round) % len(specs)
					r[j] = cycles(b, specs[j], callers, b.N)
					rates[j] = append(rates[j], r[j])
				}
				ratios = append(ratios, r[0]/r[1])
			}
			med := func(xs []float64) float64 { xs = slices.Clone(xs); slices.Sort(xs); return xs[len(xs)/2] }
			b.ReportMetric(med(rates[0]), "coordkit-ops/s")
			b.ReportMetric(med(rates[1]), "raw-ops/s")
			b.ReportMetric(med(ratios), "coordkit/raw")
			b.ReportMetric(slices.Min(ratios), "coordkit/raw-min")
			b.ReportMetric(slices.Max(ratios), "coordkit/raw-max")
		})
	}
}

// cycles runs n cycles of c with callers goroutines and returns cycles per second.
func cycles(b *testing.B, c contenderpkg.Lock, callers, n int) float64 {
	ctx := context.Background()
	run := strconv.FormatInt(runSeq.Add(1), 10)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if err := c.TryAcquireRelease(ctx, "bench:il:"+run+":"+strconv.FormatInt(i, 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// lockSpec returns the row of the lock contender table named name.
func lockSpec(b *testing.B, name string) contenderpkg.LockSpec {
	b.Helper()
	for _, spec := range contenderpkg.Locks {
		if spec.Name == name {
			return spec
		}
	}
	b.Fatalf("no lock contender %q", name)
	return contenderpkg.LockSpec{}
}
