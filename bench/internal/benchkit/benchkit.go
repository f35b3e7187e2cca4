// Package benchkit holds what the benchmark packages share: the server target (flag -target or
// $COORDKIT_BENCH_TARGET), the server's start and key cleanup, and cache-free clients.
package benchkit

import (
	"context"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/testkit"
)

// EnvTarget names the server target of the benchmarks (a testkit target such as redis8 or redis70).
const EnvTarget = "COORDKIT_BENCH_TARGET"

var targetFlag = flag.String("target", "", "server target (testkit name, e.g. redis8, redis70); default $"+EnvTarget+", else redis8, falling back to redis70 when redis8 is not installed")

// StartServer starts the benchmark server for the whole benchmark function (closed at its cleanup):
// the -target flag's target, else $COORDKIT_BENCH_TARGET's, else redis8 (redis70 when redis8 is not
// installed and no external server is configured). At cleanup it deletes the keys matching each of
// patterns with SCAN + UNLINK (this matters on an external server; a process server is discarded).
// An unknown target fails b.
func StartServer(b *testing.B, patterns ...string) *testkit.Server {
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
	b.Cleanup(func() { flushKeys(b, s, patterns) })
	return s
}

// flushKeys deletes the keys matching patterns with SCAN + UNLINK, one goroutine per pattern, logging
// (not failing on) errors.
func flushKeys(b *testing.B, s *testkit.Server, patterns []string) {
	if len(patterns) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := rueidis.NewClient(WithoutCache(s.ClientOption()))
	if err != nil {
		b.Logf("cleanup: %v", err)
		return
	}
	defer c.Close()
	var wg sync.WaitGroup
	for _, pattern := range patterns {
		wg.Go(func() {
			var cursor uint64
			for {
				e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
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
		})
	}
	wg.Wait()
}

// NewClient returns a client of s (client-side caching off, then each mutate in order), closed when b
// ends. A client that cannot be made fails b.
func NewClient(b *testing.B, s *testkit.Server, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	b.Helper()
	o := WithoutCache(s.ClientOption())
	for _, m := range mutate {
		m(&o)
	}
	c, err := rueidis.NewClient(o)
	if err != nil {
		b.Fatalf("client: %v", err)
	}
	b.Cleanup(c.Close)
	return c
}

// WithoutCache returns o with client-side caching disabled: no benchmark waits on invalidations.
func WithoutCache(o rueidis.ClientOption) rueidis.ClientOption {
	o.DisableCache = true
	return o
}
