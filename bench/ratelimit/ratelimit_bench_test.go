package ratelimitbench

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/testkit"
)

// spreadKeys is the number of distinct keys of the "spread" key pattern.
const spreadKeys = 10_000

// keyPatterns: one hot key that every decision hits, or decisions spread round-robin over spreadKeys
// keys (per-client limits).
var keyPatterns = []struct {
	name string
	keys int64
}{
	{"hot", 1},
	{"spread", spreadKeys},
}

// The policies are sized so that every decision of a run admits: the write path, the slower one,
// for every algorithm and for the peer alike.
const (
	bigLimit = int64(1) << 40
	// gcraBurst x gcraInterval = 1000s of debt: far more than a benchmark run admits on one key.
	gcraBurst    = 1_000_000
	gcraInterval = time.Millisecond
)

var algorithms = []struct {
	name   string
	policy ratelimit.Policy
}{
	{"fixed", ratelimit.FixedWindow{Limit: bigLimit, Window: time.Hour}},
	{"sliding", ratelimit.SlidingWindow{Limit: bigLimit, Window: time.Hour, Segments: 60}},
	{"token_bucket", ratelimit.TokenBucket{Limit: bigLimit, TokensPerPeriod: bigLimit, Period: time.Hour}},
	{"gcra", ratelimit.GCRA{Burst: gcraBurst, EmissionInterval: gcraInterval}},
	{"composite3", ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: bigLimit, TokensPerPeriod: bigLimit, Period: time.Second},
		ratelimit.SlidingWindow{Limit: bigLimit, Window: time.Minute, Segments: 10},
		ratelimit.FixedWindow{Limit: bigLimit, Window: time.Hour},
	}}},
}

// decider is one rate limiter under test: it decides one permit for key. It is safe for concurrent
// use.
type decider func(ctx context.Context, key string) (allowed bool, err error)

// BenchmarkAllowN: Keyed.AllowN(ctx, key, 1) in parallel (GOMAXPROCS goroutines; change with -cpu),
// one sub-benchmark per algorithm and key pattern, one shared client.
func BenchmarkAllowN(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "rate:bench:{*")
	c := benchkit.NewClient(b, s)
	for _, alg := range algorithms {
		for _, kp := range keyPatterns {
			b.Run(alg.name+"/"+kp.name, func(b *testing.B) {
				k := newKeyed(b, c, alg.policy)
				runDecider(b, coordkitDecider(k), kp.keys)
			})
		}
	}
}

// BenchmarkGCRAvsRedisRate: Coordkit's GCRA and go-redis/redis_rate's (v10) with the same settings
// (burst gcraBurst, one permit per gcraInterval: redis_rate.Limit{Rate: 1000, Burst: gcraBurst,
// Period: time.Second}) on the same server, for each key pattern. The redis_rate row reports
// coordkit/redis_rate, the ratio of the two decisions/s figures of this run, and logs it.
func BenchmarkGCRAvsRedisRate(b *testing.B) {
	s := benchkit.StartServer(b, "bench:{*", "rate:bench:{*")
	c := benchkit.NewClient(b, s)
	pooled := benchkit.NewClient(b, s, func(o *rueidis.ClientOption) { o.DisableAutoPipelining = true })
	rdb := redis.NewClient(goRedisOptions(s))
	b.Cleanup(func() { _ = rdb.Close() })
	rl := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: int(time.Second / gcraInterval), Burst: gcraBurst, Period: time.Second}
	for _, kp := range keyPatterns {
		// Decisions/s of the final (full-length) run of each sub-benchmark, by GOMAXPROCS (-cpu runs
		// every sub-benchmark once per value).
		coordkitRate, pooledRate, peerRate := map[int]float64{}, map[int]float64{}, map[int]float64{}
		b.Run("coordkit/"+kp.name, func(b *testing.B) {
			k := newKeyed(b, c, ratelimit.GCRA{Burst: gcraBurst, EmissionInterval: gcraInterval})
			coordkitRate[runtime.GOMAXPROCS(0)] = runDecider(b, coordkitDecider(k), kp.keys)
		})
		// The same limiter over a rueidis client in pooled mode (DisableAutoPipelining: a connection
		// per in-flight call, as go-redis does): the client choice, not the library, decides the
		// low-concurrency figure.
		b.Run("coordkit_pooled/"+kp.name, func(b *testing.B) {
			k := newKeyed(b, pooled, ratelimit.GCRA{Burst: gcraBurst, EmissionInterval: gcraInterval})
			pooledRate[runtime.GOMAXPROCS(0)] = runDecider(b, coordkitDecider(k), kp.keys)
		})
		b.Run("redis_rate/"+kp.name, func(b *testing.B) {
			procs := runtime.GOMAXPROCS(0)
			peerRate[procs] = runDecider(b, func(ctx context.Context, key string) (bool, error) {
				res, err := rl.AllowN(ctx, key, limit, 1)
				if err != nil {
					return false, err
				}
				return res.Allowed == 1, nil
			}, kp.keys)
			if peerRate[procs] > 0 && coordkitRate[procs] > 0 {
				b.ReportMetric(coordkitRate[procs]/peerRate[procs], "coordkit/redis_rate")
			}
			if peerRate[procs] > 0 && pooledRate[procs] > 0 {
				b.ReportMetric(pooledRate[procs]/peerRate[procs], "coordkit_pooled/redis_rate")
			}
		})
		for _, procs := range slices.Sorted(maps.Keys(peerRate)) {
			if ck, peer := coordkitRate[procs], peerRate[procs]; ck > 0 && peer > 0 {
				b.Logf("%s key(s), GOMAXPROCS %d: coordkit %.0f decisions/s (pooled client %.0f), redis_rate %.0f decisions/s, ratio coordkit/redis_rate %.2f (pooled %.2f)",
					kp.name, procs, ck, pooledRate[procs], peer, ck/peer, pooledRate[procs]/peer)
			}
		}
	}
}

func coordkitDecider(k *ratelimit.Keyed) decider {
	return func(ctx context.Context, key string) (bool, error) {
		res, err := k.AllowN(ctx, key, 1)
		return res.Allowed, err
	}
}

// runDecider runs d in parallel over keys distinct keys of this run (round-robin) and reports
// decisions/s and the admitted share; it returns decisions/s.
func runDecider(b *testing.B, d decider, keys int64) float64 {
	ctx := context.Background()
	// Each run (b.N grows between runs) uses its own keys, so every run starts from fresh state.
	prefix := "bench:{" + strconv.FormatInt(runSeq.Add(1), 10) + "}:"
	names := make([]string, keys)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	var seq, admitted atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			ok, err := d(ctx, names[n%keys])
			if err != nil {
				b.Errorf("decision: %v", err)
				return
			}
			if ok {
				admitted.Add(1)
			}
		}
	})
	b.StopTimer()
	var rate float64
	if sec := b.Elapsed().Seconds(); sec > 0 {
		rate = float64(b.N) / sec
		b.ReportMetric(rate, "decisions/s")
	}
	if b.N > 0 {
		b.ReportMetric(float64(admitted.Load())/float64(b.N), "admitted/op")
	}
	return rate
}

var runSeq atomic.Int64

// newKeyed returns a Keyed limiter over c, closed when b ends.
func newKeyed(b *testing.B, c rueidis.Client, p ratelimit.Policy) *ratelimit.Keyed {
	k, err := ratelimit.NewKeyed(c, p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

// goRedisOptions returns go-redis options for s, with the credentials and database of an external
// server.
func goRedisOptions(s *testkit.Server) *redis.Options {
	o := s.ClientOption()
	return &redis.Options{Addr: s.Addr, Username: o.Username, Password: o.Password, DB: o.SelectDB}
}
