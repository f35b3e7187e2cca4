package ratelimitbench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
)

// BenchmarkHotKeyOverhead measures the library's cost on the decision path: one hot GCRA key decided
// by exactly 1, 8 and 64 concurrent callers through one shared client, by three contenders side by
// side in the same run:
//
//   - raw: the engine's own GCRA script (ratelimit/engine_gcra.lua, read from the source tree) sent
//     as a single EVALSHA with the arguments the library sends, reply read as an array;
//   - limiter: Limiter.AllowN(ctx, 1);
//   - keyed: Keyed.AllowN(ctx, key, 1).
//
// Each b.N iteration is one decision per contender, made by the same callers goroutines throughout
// (started, and warmed up, before the timer); the contenders run in interleaved rounds of roundOps
// decisions each, the order rotating every round (so that machine load drifts alike for all
// three), each on its own key. It reports ns/decision per contender and the ratios limiter/raw and
// keyed/raw of decisions/s (1.0 = no overhead) over the whole run and as the median of the
// per-round ratios (limiter/raw-median, keyed/raw-median: robust to load that drifts between
// rounds), and the server's CPU time per script call of each
// contender (INFO commandstats, cmdstat_evalsha usec/calls, read around each of its rounds) with the
// ratios to raw's, and logs them all. Timing is reported, never asserted.
func BenchmarkHotKeyOverhead(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "..", "ratelimit", "engine_gcra.lua"))
	if err != nil {
		b.Skipf("engine script not found in the source tree: %v", err)
	}
	// The same source the library sends: with the ACL preamble MustLoad puts before it.
	raw := rueidis.NewLuaScript(luakit.WithACLPreamble(string(src)))
	s := benchkit.StartServer(b, "bench:{*", "rate:bench:{*")
	c := benchkit.NewClient(b, s)
	policy := ratelimit.GCRA{Burst: gcraBurst, EmissionInterval: gcraInterval}
	rawArgs := []string{"d", "1", strconv.Itoa(gcraBurst), strconv.FormatInt(gcraInterval.Microseconds(), 10)}
	for _, callers := range []int{1, 8, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			prefix := "bench:{" + strconv.FormatInt(runSeq.Add(1), 10) + "}:"
			lim, err := ratelimit.New(c, prefix+"limiter", policy)
			if err != nil {
				b.Fatal(err)
			}
			defer lim.Close(context.Background())
			kd, err := ratelimit.NewKeyed(c, policy)
			if err != nil {
				b.Fatal(err)
			}
			defer kd.Close(context.Background())
			rawKey, keyedKey := []string{prefix + "raw"}, prefix+"keyed"
			ctx := context.Background()
			contenders := []func() error{
				func() error { _, err := raw.Exec(ctx, c, rawKey, rawArgs).ToArray(); return err },
				func() error { _, err := lim.AllowN(ctx, 1); return err },
				func() error { _, err := kd.AllowN(ctx, keyedKey, 1); return err },
			}
			// Warm up: load the scripts (a first EVALSHA meets NOSCRIPT and falls back to EVAL, which
			// compiles) and the connections, outside the timed rounds.
			// The caller goroutines live for the whole sub-benchmark (see callerPool) and warm up too.
			pool := newCallerPool(callers)
			defer pool.close()
			for _, f := range contenders {
				for range 100 {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := pool.run(4*callers, f); err != nil {
					b.Fatal(err)
				}
			}
			var spent [3]time.Duration
			var server [3]evalStats
			var perRound [2][]float64 // limiter/raw and keyed/raw of each full round
			b.ResetTimer()
			for round := 0; round*roundOps < b.N; round++ {
				ops := min(roundOps, b.N-round*roundOps)
				var took [3]time.Duration
				for j := range contenders {
					i := (j + round) % len(contenders) // rotate who goes first
					before := readEvalStats(b, c)
					d, err := pool.run(ops, contenders[i])
					if err != nil {
						b.Fatal(err)
					}
					spent[i] += d
					took[i] = d
					server[i].add(readEvalStats(b, c).sub(before))
				}
				if ops == roundOps {
					perRound[0] = append(perRound[0], float64(took[0])/float64(took[1]))
					perRound[1] = append(perRound[1], float64(took[0])/float64(took[2]))
				}
			}
			b.StopTimer()
			if b.N < 1000 {
				return // the calibration runs are too short to mean anything
			}
			ns := func(i int) float64 { return float64(spent[i].Nanoseconds()) / float64(b.N) }
			b.ReportMetric(ns(0), "raw-ns/decision")
			b.ReportMetric(ns(1), "limiter-ns/decision")
			b.ReportMetric(ns(2), "keyed-ns/decision")
			b.ReportMetric(ns(0)/ns(1), "limiter/raw")
			b.ReportMetric(ns(0)/ns(2), "keyed/raw")
			med := func(xs []float64) float64 { xs = slices.Clone(xs); slices.Sort(xs); return xs[len(xs)/2] }
			if len(perRound[0]) > 0 {
				b.ReportMetric(med(perRound[0]), "limiter/raw-median")
				b.ReportMetric(med(perRound[1]), "keyed/raw-median")
			}
			us := func(i int) float64 { return server[i].perCall() }
			b.ReportMetric(us(0), "raw-server-us/call")
			b.ReportMetric(us(1), "limiter-server-us/call")
			b.ReportMetric(us(2), "keyed-server-us/call")
			b.Logf("%d callers, %d decisions each: raw %.0f/s, Limiter %.0f/s (ratio %.3f), Keyed %.0f/s (ratio %.3f); "+
				"server µs per script call: raw %.2f, Limiter %.2f (×%.3f), Keyed %.2f (×%.3f)",
				callers, b.N, 1e9/ns(0), 1e9/ns(1), ns(0)/ns(1), 1e9/ns(2), ns(0)/ns(2),
				us(0), us(1), us(1)/us(0), us(2), us(2)/us(0))
			if len(perRound[0]) > 0 {
				b.Logf("median over %d rounds of the per-round ratio: limiter/raw %.3f, keyed/raw %.3f",
					len(perRound[0]), med(perRound[0]), med(perRound[1]))
			}
		})
	}
}

// evalStats is the cmdstat_evalsha line of INFO commandstats: calls and total CPU µs.
type evalStats struct{ calls, usec int64 }

func (s evalStats) sub(o evalStats) evalStats { return evalStats{s.calls - o.calls, s.usec - o.usec} }

func (s *evalStats) add(o evalStats) { s.calls += o.calls; s.usec += o.usec }

// perCall is the server CPU µs per call (0 without calls).
func (s evalStats) perCall() float64 {
	if s.calls == 0 {
		return 0
	}
	return float64(s.usec) / float64(s.calls)
}

// readEvalStats reads cmdstat_evalsha from INFO commandstats (zero before the first EVALSHA).
func readEvalStats(b *testing.B, c rueidis.Client) evalStats {
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var st evalStats
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "calls":
				st.calls = n
			case "usec":
				st.usec = n
			}
		}
	}
	return st
}

// roundOps is how many decisions one contender makes before the next one takes its turn.
const roundOps = 500

// callerPool is callers goroutines that live for a whole sub-benchmark and make the calls of every
// round: like the long-lived goroutines of a server (one per connection), they grow their stacks
// once, so a round measures the calls and not goroutine start-up and stack growth (a fresh goroutine
// per caller per round spent about a third of its CPU time growing its stack for the deepest call
// path, a cost of the harness that would have decided the ratios).
type callerPool struct {
	work []chan poolRound
	done sync.WaitGroup // one Done per worker per round
	exit sync.WaitGroup // the workers themselves
}

// poolRound is one worker's share of a round.
type poolRound struct {
	n     int
	f     func() error
	first *atomic.Pointer[error]
}

func newCallerPool(callers int) *callerPool {
	p := &callerPool{work: make([]chan poolRound, callers)}
	for i := range p.work {
		ch := make(chan poolRound)
		p.work[i] = ch
		p.exit.Add(1)
		go func() {
			defer p.exit.Done()
			for r := range ch {
				for range r.n {
					if err := r.f(); err != nil {
						r.first.CompareAndSwap(nil, &err)
						break
					}
				}
				p.done.Done()
			}
		}()
	}
	return p
}

// run makes ops calls of f from the pool's goroutines (ops split evenly) and returns the wall time
// they took and the first error.
func (p *callerPool) run(ops int, f func() error) (time.Duration, error) {
	var first atomic.Pointer[error]
	callers := len(p.work)
	p.done.Add(callers)
	start := time.Now()
	for g, ch := range p.work {
		share := ops / callers
		if g < ops%callers {
			share++
		}
		ch <- poolRound{n: share, f: f, first: &first}
	}
	p.done.Wait()
	d := time.Since(start)
	if e := first.Load(); e != nil {
		return d, *e
	}
	return d, nil
}

// close ends the pool's goroutines and waits for them.
func (p *callerPool) close() {
	for _, ch := range p.work {
		close(ch)
	}
	p.exit.Wait()
}
