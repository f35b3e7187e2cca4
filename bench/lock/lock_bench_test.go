package lockbench

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	contenderpkg "github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/testkit"
)

// contenders is the contender table (../internal/contenders, shared with the peer runner
// cmd/peers): Coordkit, its peers (rueidislock, bsm/redislock, go-redsync/redsync) and the raw
// two-script ceiling, each over its own clients of the benchmark server. The ceiling row is what
// BenchmarkRawEvalsha runs; every other row is a sub-benchmark of BenchmarkTryAcquireRelease.
var contenders = contenderpkg.Locks

// newContender builds spec's contender over its own clients of s, closed when b ends.
func newContender(b *testing.B, spec contenderpkg.LockSpec, s *testkit.Server) contenderpkg.Lock {
	b.Helper()
	c, err := spec.New(contenderpkg.FromTestkit(s))
	if err != nil {
		b.Fatalf("%s: %v", spec.Name, err)
	}
	b.Cleanup(c.Close)
	return c
}

// BenchmarkTryAcquireRelease: TryAcquire then Release on a distinct key per operation, in parallel
// (GOMAXPROCS goroutines; change with -cpu), one sub-benchmark per contender.
func BenchmarkTryAcquireRelease(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*")
	for _, spec := range contenders {
		if spec.Ceiling {
			continue
		}
		b.Run(spec.Name, func(b *testing.B) { runContender(b, newContender(b, spec, s)) })
	}
}

// BenchmarkRawEvalsha: the server ceiling. A minimal lock-shaped script pair (SET NX PX + INCR, then
// compare-and-delete) through the same kind of rueidis client, the same parallelism and key pattern,
// with none of Coordkit's checks. Read the others as a ratio to it.
func BenchmarkRawEvalsha(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*")
	for _, spec := range contenders {
		if spec.Ceiling {
			b.Run(spec.Name, func(b *testing.B) { runContender(b, newContender(b, spec, s)) })
		}
	}
}

// runContender runs c in parallel on distinct keys and reports ops/s.
func runContender(b *testing.B, c contenderpkg.Lock) {
	ctx := context.Background()
	// Each run (b.N grows between runs) uses its own key space, so no key is ever reused.
	run := runSeq.Add(1)
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			key := "bench:" + strconv.FormatInt(run, 10) + ":" + strconv.FormatInt(n, 10)
			if err := c.TryAcquireRelease(ctx, key); err != nil {
				b.Errorf("%s: %v", c.Name(), err)
				return
			}
		}
	})
	b.StopTimer()
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(float64(b.N)/sec, "ops/s")
	}
}

var runSeq atomic.Int64
