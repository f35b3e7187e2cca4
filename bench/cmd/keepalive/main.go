// Command keepalive measures what holding many kept-alive leases costs one client: it starts a server
// with testkit (Redis 8 by default), takes N lock leases on one rueidis client with
// lock.Locker.TryAcquire and starts Lease.KeepAlive on each (many acquisitions in flight at once, so
// the client pipelines them), lets the renewals settle, then reports for each N:
//
//   - goroutines: the process's goroutine count while the leases are held (the most seen during the
//     measurement) minus the count before the first acquisition;
//   - heap/lease: runtime.MemStats.HeapInuse after a GC while held, minus before the acquisitions,
//     over N (the Lease values, their keep-alive state, and the client's buffers);
//   - sys: runtime.MemStats.Sys while held (all memory the Go runtime obtained from the OS);
//   - renewals/s: the server's INFO commandstats EVALSHA calls over the measurement window (nothing
//     else runs scripts meanwhile);
//   - failed: acquisitions that did not return a lease (on a starved machine a reply can come after
//     the lease's estimate elapsed: ErrLateReply); heap/lease counts only the leases held;
//   - lost: held leases that had stopped vouching by the end of the measurement (a renewal that did
//     not keep up with the TTL ends its lease with ErrExpired);
//   - acquire: how long taking the N leases (and starting their KeepAlive) took.
//
// Usage:
//
//	go run ./cmd/keepalive                        # N = 1000, 10000, 100000, TTL 3s, 10s window
//	go run ./cmd/keepalive -n 1000,10000 -ttl 3s -window 10s -target redis8
//	go run ./cmd/keepalive -cancellable          # KeepAlive(ctx) with one shared cancellable ctx
//
// With $COORDKIT_REDIS_URL set, testkit uses that server instead. The leases are released at the end;
// the locks' fencing counters ({ka:<run>:<i>}:fence) stay on the server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

func main() {
	ns := flag.String("n", "1000,10000,100000", "comma-separated numbers of held leases")
	ttl := flag.Duration("ttl", 3*time.Second, "lease TTL")
	settle := flag.Duration("settle", 5*time.Second, "wait after the last KeepAlive before measuring")
	window := flag.Duration("window", 10*time.Second, "measurement window of renewals/s")
	workers := flag.Int("workers", 256, "concurrent acquisitions")
	target := flag.String("target", string(testkit.Redis8), "testkit server target")
	cancellable := flag.Bool("cancellable", false, "give every KeepAlive one shared cancellable ctx (default context.Background())")
	flag.Parse()
	ctx := context.Background()
	fmt.Printf("date: %s  go: %s  GOMAXPROCS: %d  TTL: %v\n", time.Now().UTC().Format(time.RFC3339), runtime.Version(), runtime.GOMAXPROCS(0), *ttl)
	fmt.Printf("%8s %11s %11s %11s %12s %7s %7s %9s\n", "N", "goroutines", "heap/lease", "sys MiB", "renewals/s", "failed", "lost", "acquire")
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("bad -n %q", f))
		}
		kctx := ctx
		var cancel context.CancelFunc = func() {}
		if *cancellable {
			kctx, cancel = context.WithCancel(ctx)
		}
		err = measure(ctx, kctx, testkit.Target(*target), n, *ttl, *settle, *window, *workers)
		cancel()
		if err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "keepalive:", err)
	os.Exit(1)
}

// measure takes n leases, keeps them alive with kctx, and prints one row.
func measure(ctx, kctx context.Context, target testkit.Target, n int, ttl, settle, window time.Duration, workers int) error {
	s, err := testkit.Launch(ctx, target)
	if err != nil {
		return err
	}
	defer s.Close()
	if n == 1000 || os.Getenv("KA_VERBOSE") != "" {
		fmt.Printf("server: %s %s (%s)\n", s.Flavor, s.Version, s.Backend)
	}
	opt := s.ClientOption()
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := lock.New(c)
	if err != nil {
		return err
	}
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		return err
	}

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	leases := make([]*lock.Lease, n)
	var next, failed atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				le, err := l.TryAcquire(ctx, "ka:"+run+":"+strconv.Itoa(i), ttl)
				if err == nil {
					err = le.KeepAlive(kctx)
				}
				if err != nil {
					// Counted, not fatal: on a starved machine an acquisition's reply can come
					// after its estimate elapsed (ErrLateReply).
					failed.Add(1)
					errOnce.Do(func() { firstErr = fmt.Errorf("lease %d: %w", i, err) })
					continue
				}
				leases[i] = le
			}
		})
	}
	wg.Wait()
	acquire := time.Since(start)
	defer releaseAll(ctx, leases, workers)
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "N=%d: %d acquisitions failed; the first: %v\n", n, failed.Load(), firstErr)
	}
	held := int64(n) - failed.Load()
	if held == 0 {
		return firstErr
	}

	time.Sleep(settle)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)

	before, err := s.CommandStats(ctx)
	if err != nil {
		return err
	}
	peak := 0
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, runtime.NumGoroutine())
	}
	after, err := s.CommandStats(ctx)
	if err != nil {
		return err
	}
	lost := 0
	for _, le := range leases {
		if le != nil && le.Err() != nil {
			lost++
		}
	}
	heap := (int64(m1.HeapInuse) - int64(m0.HeapInuse)) / held
	rate := float64(after["evalsha"]-before["evalsha"]) / window.Seconds()
	fmt.Printf("%8d %11d %9d B %11.0f %12.0f %7d %7d %9s\n", n, peak-g0, heap, float64(m1.Sys)/(1<<20), rate, failed.Load(), lost, acquire.Round(time.Millisecond))
	return nil
}

// releaseAll releases every lease on workers goroutines, ignoring leases that already ended.
func releaseAll(ctx context.Context, leases []*lock.Lease, workers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(leases) {
					return
				}
				if le := leases[i]; le != nil {
					if _, err := le.Release(ctx); err != nil && !errors.Is(err, lock.ErrUncertain) {
						fmt.Fprintln(os.Stderr, "release:", err)
					}
				}
			}
		})
	}
	wg.Wait()
}
