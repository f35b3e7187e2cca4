package lockbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/benchkit"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// benchTTL is the lease TTL of every operation: far longer than one operation, so leases never expire
// mid-operation, and every key gets a fresh lease.
const benchTTL = 10 * time.Second

// contender is one lock implementation under test: it takes and releases a lock named key once. key is
// distinct per call; an implementation derives the keys it needs from it as lock.Keys does
// ({key}:lease, {key}:fence: one hash tag). A contender is safe for concurrent use.
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
	s := benchkit.StartServer(b, "bench:{*")
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
	s := benchkit.StartServer(b, "bench:{*")
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

// coordkit: lock.Locker TryAcquire + Lease.Release.
type coordkitContender struct{ lk *lock.Locker }

func newCoordkit(b *testing.B, s *testkit.Server) contender {
	lk, err := lock.New(benchkit.NewClient(b, s))
	if err != nil {
		b.Fatal(err)
	}
	return coordkitContender{lk}
}

func (coordkitContender) Name() string { return "coordkit" }

func (c coordkitContender) TryAcquireRelease(ctx context.Context, key string) error {
	lease, err := c.lk.TryAcquire(ctx, key, benchTTL) // {key}:lease, {key}:fence
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
	return &rawContender{c: benchkit.NewClient(b, s), ttl: strconv.FormatInt(benchTTL.Milliseconds(), 10)}
}

func (*rawContender) Name() string { return "raw-rueidis" }

var errRawNotAcquired = errors.New("raw: not acquired")

func (r *rawContender) TryAcquireRelease(ctx context.Context, key string) error {
	owner := strconv.FormatInt(r.owner.Add(1), 10)
	lease, fence := lock.Keys(key)
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
