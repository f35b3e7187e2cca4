package lockbench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// EnvTarget names the server target of the benchmarks (a testkit target such as redis8 or redis70).
const EnvTarget = "COORDKIT_BENCH_TARGET"

var targetFlag = flag.String("target", "", "server target (testkit name, e.g. redis8, redis70); default $"+EnvTarget+", else redis8, falling back to redis70 when redis8 is not installed")

// benchTTL is the lease TTL of every operation: far longer than one operation, so leases never expire
// mid-operation, and every key gets a fresh lease.
const benchTTL = 10 * time.Second

// contender is one lock implementation under test: it takes and releases a lock on key once. key is
// distinct per call; an implementation derives the keys it needs from it (same hash tag). A contender
// is safe for concurrent use.
type contender interface {
	Name() string
	TryAcquireRelease(ctx context.Context, key string) error
}

// contenderSpec is a row of the contender table: how to build the contender over a client of the
// benchmark server. ceiling marks the raw-server row that BenchmarkRawEvalsha runs; every other row is a
// sub-benchmark of BenchmarkTryAcquireRelease.
//
// Peers (rueidislock, bsm/redislock, go-redsync/redsync) slot in as further rows: a constructor that
// builds the peer over its own client of s.Addr (s.ClientOption() for rueidis-based peers; go-redis
// peers take redis.Options{Addr: s.Addr}) and a TryAcquireRelease that makes one non-waiting attempt
// and releases, with the same TTL.
type contenderSpec struct {
	name    string
	ceiling bool
	new     func(b *testing.B, s *testkit.Server) contender
}

var contenders = []contenderSpec{
	{name: "coordkit", new: newCoordkit},
	{name: "raw-rueidis", ceiling: true, new: newRaw},
}

// BenchmarkTryAcquireRelease: TryAcquire then Release on a distinct key per operation, in parallel
// (GOMAXPROCS goroutines; change with -cpu), one sub-benchmark per contender.
func BenchmarkTryAcquireRelease(b *testing.B) {
	s := startServer(b)
	for _, spec := range contenders {
		if spec.ceiling {
			continue
		}
		b.Run(spec.name, func(b *testing.B) { runContender(b, spec.new(b, s)) })
	}
}

// BenchmarkRawEvalsha: the server ceiling. A minimal lock-shaped script pair (SET NX PX + INCR, then
// compare-and-delete) through the same kind of rueidis client, the same parallelism and key pattern,
// with none of Coordkit's checks. Read the others as a ratio to it.
func BenchmarkRawEvalsha(b *testing.B) {
	s := startServer(b)
	for _, spec := range contenders {
		if spec.ceiling {
			b.Run(spec.name, func(b *testing.B) { runContender(b, spec.new(b, s)) })
		}
	}
}

// runContender runs c in parallel on distinct keys and reports ops/s.
func runContender(b *testing.B, c contender) {
	ctx := context.Background()
	// Each run (b.N grows between runs) uses its own key space, so no key is ever reused.
	run := runSeq.Add(1)
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			key := "bench:{" + strconv.FormatInt(run, 10) + ":" + strconv.FormatInt(n, 10) + "}"
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

// startServer starts the benchmark server for the whole benchmark function (closed at its cleanup).
func startServer(b *testing.B) *testkit.Server {
	b.Helper()
	target := testkit.Target(*targetFlag)
	if target == "" {
		target = testkit.Target(os.Getenv(EnvTarget))
	}
	if target == "" {
		target = testkit.Redis8
		if os.Getenv(testkit.EnvRedisURL) == "" {
			if _, err := testkit.Binary(testkit.Redis8); err != nil {
				b.Logf("redis8 not installed (%v); falling back to redis70", err)
				target = testkit.Redis70
			}
		}
	}
	if !target.Known() {
		b.Fatalf("unknown target %q (known: %v)", target, testkit.AllTargets())
	}
	s := testkit.Start(b, target)
	b.Logf("server: %s %s (%s, %s)", s.Flavor, s.Version, s.Backend, s.Addr)
	// Drop this run's keys when it ends (matters on an external server; a process server is discarded).
	b.Cleanup(func() { flushBenchKeys(b, s) })
	return s
}

// flushBenchKeys deletes the bench:* keys with SCAN + UNLINK.
func flushBenchKeys(b *testing.B, s *testkit.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rueidis.NewClient(withoutCache(s.ClientOption()))
	if err != nil {
		b.Logf("cleanup: %v", err)
		return
	}
	defer c.Close()
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match("bench:{*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			b.Logf("cleanup: %v", err)
			return
		}
		if len(e.Elements) > 0 {
			if err := c.Do(ctx, c.B().Unlink().Key(e.Elements...).Build()).Error(); err != nil {
				b.Logf("cleanup: %v", err)
				return
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return
		}
	}
}

// newClient returns a client of s, closed when b ends. Client-side caching is off: no contender waits,
// so none needs invalidations.
func newClient(b *testing.B, s *testkit.Server) rueidis.Client {
	c, err := rueidis.NewClient(withoutCache(s.ClientOption()))
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	b.Cleanup(c.Close)
	return c
}

func withoutCache(o rueidis.ClientOption) rueidis.ClientOption {
	o.DisableCache = true
	return o
}

// coordkit: lock.Locker TryAcquire + Lease.Release.
type coordkitContender struct{ lk *lock.Locker }

func newCoordkit(b *testing.B, s *testkit.Server) contender {
	lk, err := lock.New(newClient(b, s))
	if err != nil {
		b.Fatal(err)
	}
	return coordkitContender{lk}
}

func (coordkitContender) Name() string { return "coordkit" }

func (c coordkitContender) TryAcquireRelease(ctx context.Context, key string) error {
	lease, err := c.lk.TryAcquire(ctx, key+":lease", key+":fence", benchTTL)
	if err != nil {
		return err
	}
	out, err := lease.Release(ctx)
	if err != nil {
		return err
	}
	if out != lock.Released {
		return fmt.Errorf("release: %v", out)
	}
	return nil
}

// raw-rueidis: the least a fenced lock can do, as two EVALSHA round trips.
var (
	rawAcquire = rueidis.NewLuaScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	rawRelease = rueidis.NewLuaScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

type rawContender struct {
	c     rueidis.Client
	owner atomic.Int64 // owner tokens: unique per operation, deliberately cheap (not random)
	ttl   string
}

func newRaw(b *testing.B, s *testkit.Server) contender {
	return &rawContender{c: newClient(b, s), ttl: strconv.FormatInt(benchTTL.Milliseconds(), 10)}
}

func (*rawContender) Name() string { return "raw-rueidis" }

var errRawNotAcquired = errors.New("raw: not acquired")

func (r *rawContender) TryAcquireRelease(ctx context.Context, key string) error {
	owner := strconv.FormatInt(r.owner.Add(1), 10)
	lease, fence := key+":lease", key+":fence"
	token, err := rawAcquire.Exec(ctx, r.c, []string{lease, fence}, []string{owner, r.ttl}).AsInt64()
	if err != nil {
		return err
	}
	if token <= 0 {
		return errRawNotAcquired
	}
	n, err := rawRelease.Exec(ctx, r.c, []string{lease}, []string{owner}).AsInt64()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("raw: release deleted %d keys", n)
	}
	return nil
}
