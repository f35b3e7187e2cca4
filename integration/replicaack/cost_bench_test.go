package replicaack_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// BenchmarkLockCycleAck measures the lock cycle (TryAcquire + Release, one caller) on a primary with
// one replica (the first Sentinel target), without the acknowledgement and with WAIT 1, in one run:
// ns/op, and the p50 and p99 of one cycle. Run with
//
//	cd integration && COORDKIT_SENTINELS=redis go test -run '^$' -bench LockCycleAck ./replicaack/
func BenchmarkLockCycleAck(b *testing.B) {
	targets := matrix.SentinelTargets()
	if len(targets) == 0 {
		b.Fatal("no Sentinel target selected (COORDKIT_SENTINELS)")
	}
	g := matrix.StartEnv(b, targets[0]).Sentinel
	c := g.Client(b, matrix.NoCache)
	for _, row := range []struct {
		name string
		ack  luakit.ReplicaAck
	}{
		{"off", luakit.ReplicaAck{}},
		{"wait1", luakit.ReplicaAck{Replicas: 1, Timeout: time.Second}},
	} {
		b.Run(row.name, func(b *testing.B) {
			lk, err := lock.New(c, lock.WithReplicaAck(row.ack))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			took := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				l, err := lk.TryAcquire(ctx, "ack:bench", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
