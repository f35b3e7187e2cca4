package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/callgrind"
	"github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/testkit"
)

// skipCommands are left out of the commandstats deltas: the runner's own INFO, and connection
// set-up and keep-alive commands that no operation sends.
var skipCommands = []string{"info", "ping", "hello", "client|setinfo", "client|tracking", "client|setname", "select", "auth", "cluster|slots", "cluster|shards", "cluster|nodes"}

// spreadKeys is the number of distinct keys of the GCRA "spread" pattern.
const spreadKeys = 10_000

// Key patterns of the GCRA section.
const (
	keysHot    = "hot"
	keysSpread = "spread"
)

// runner holds what the sections share: the nodes whose server work is counted, and a unique
// prefix for every key of this run.
type runner struct {
	cfg    config
	nodes  []*testkit.Server // the server, or the cluster's primaries
	prefix string            // ckpeers:<unix nanos>
	sample atomic.Int64      // measurement number: part of each measurement's keys
	out    io.Writer
	// valgrind is the valgrind executable of the instruction phase ("": no instruction phase), and
	// url the server's address for the phase's child process (testkit's EnvRedisURL).
	valgrind, url string
}

// run runs the configured sections on one server and prints the tables to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	rep := &peers.Report{
		Date: time.Now().UTC().Format(time.RFC3339),
		Machine: peers.Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NumCPU: runtime.NumCPU(),
			GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version()},
		Settings: peers.Settings{Rounds: cfg.rounds, Duration: cfg.duration.String(), Callers: cfg.callers,
			Handoffs: cfg.handoffs, Sections: cfg.sections},
	}
	r := &runner{cfg: cfg, prefix: "ckpeers:" + strconv.FormatInt(time.Now().UnixNano(), 36), out: out}
	if cfg.has(sectionLock) || cfg.has(sectionHandoff) || cfg.has(sectionGCRA) || cfg.has(sectionConditional) || cfg.has(sectionFair) {
		s, err := testkit.Launch(ctx, cfg.target)
		if err != nil {
			return err
		}
		defer s.Close()
		rep.Server = peers.ServerInfo{Target: string(cfg.target), Flavor: string(s.Flavor), Version: s.Version, Backend: s.Backend}
		logf(out, "server: %s %s (%s, %s); %d CPUs, GOMAXPROCS %d, %s; %d rounds of %s",
			s.Flavor, s.Version, s.Backend, s.Addr, rep.Machine.NumCPU, rep.Machine.GOMAXPROCS, rep.Machine.Go, cfg.rounds, cfg.duration)
		r.nodes = []*testkit.Server{s}
		r.url = os.Getenv(testkit.EnvRedisURL)
		if r.url == "" {
			r.url = "redis://" + s.Addr
		}
		if cfg.instructions && (cfg.has(sectionLock) || cfg.has(sectionGCRA)) {
			switch r.valgrind, err = callgrind.Valgrind(); {
			case err != nil:
				logf(out, "instructions: not measured: %v (-instructions=false to say so; install valgrind to measure them)", err)
			case !callgrind.Supported:
				r.valgrind = ""
				logf(out, "instructions: not measured: callgrind client requests are written for amd64 only, not %s", runtime.GOARCH)
			}
		}
		srv := contenders.FromTestkit(s)
		defer r.cleanup(ctx)
		if cfg.has(sectionLock) {
			if rep.Lock, rep.LockAllocs, rep.LockInstructions, err = r.lockSection(ctx, srv); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
			r.cleanup(ctx)
		}
		if cfg.has(sectionConditional) {
			if rep.Conditional, rep.ConditionalAllocs, _, err = r.lockTable(ctx, srv, sectionConditional, contenders.CoordkitConditional,
				"Coordkit lock cycles, scripts vs conditional commands (TryAcquire [+ Extend] + Release)",
				contenders.CoordkitScripts, contenders.CoordkitExtendScripts, "Coordkit lock cycle client allocations (one goroutine)", ""); err != nil {
				return fmt.Errorf("conditional: %w", err)
			}
			r.cleanup(ctx)
		}
		if cfg.has(sectionHandoff) {
			if rep.Handoff, err = r.handoffSection(ctx, srv); err != nil {
				return fmt.Errorf("hand-off: %w", err)
			}
			r.cleanup(ctx)
		}
		if cfg.has(sectionGCRA) {
			if rep.GCRA, rep.GCRAAllocs, rep.GCRAInstructions, err = r.gcraSection(ctx, srv); err != nil {
				return fmt.Errorf("gcra: %w", err)
			}
			r.cleanup(ctx)
		}
		if cfg.has(sectionFair) {
			if rep.Fair, err = r.fairSection(ctx, srv); err != nil {
				return fmt.Errorf("fair: %w", err)
			}
			r.cleanup(ctx)
		}
	}
	if cfg.has(sectionCluster) {
		cl, err := r.clusterSection(ctx, rep)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		rep.Cluster = cl
	}
	if cfg.has(sectionAck) {
		a, err := r.ackSection(ctx)
		if err != nil {
			return fmt.Errorf("ack: %w", err)
		}
		rep.Ack = a
	}
	if cfg.jsonPath != "" {
		if err := writeJSON(cfg.jsonPath, rep); err != nil {
			return err
		}
		logf(out, "wrote %s", cfg.jsonPath)
	}
	return fairVerdict(rep.Fair) // after the report: a violation is printed and written, then fails the run
}

// snapshot is the server work counters of every node at one moment.
type snapshot struct {
	stats map[string]peers.Stat
	cpu   int64
}

// snap reads INFO commandstats and INFO cpu of every node (summed).
func (r *runner) snap(ctx context.Context) (snapshot, error) {
	sn := snapshot{stats: map[string]peers.Stat{}}
	for _, n := range r.nodes {
		st, err := info(ctx, n, "commandstats")
		if err != nil {
			return sn, err
		}
		m, err := peers.ParseCommandstats(st)
		if err != nil {
			return sn, err
		}
		for k, v := range m {
			a := sn.stats[k]
			sn.stats[k] = peers.Stat{Calls: a.Calls + v.Calls, Usec: a.Usec + v.Usec}
		}
		c, err := info(ctx, n, "cpu")
		if err != nil {
			return sn, err
		}
		cpu, err := peers.ParseCPU(c)
		if err != nil {
			return sn, err
		}
		sn.cpu += cpu
	}
	return sn, nil
}

func info(ctx context.Context, s *testkit.Server, section string) (string, error) {
	m, err := s.Do(ctx, "INFO", section)
	if err != nil {
		return "", err
	}
	return m.ToString()
}

// op is one operation of a measurement; n is unique within the measurement.
type op func(ctx context.Context, n int64) error

// measure runs op from callers goroutines for d and returns the sample with the server's work
// meanwhile. The first error stops the measurement and is returned.
func (r *runner) measure(ctx context.Context, callers int, d time.Duration, f op) (peers.Sample, error) {
	before, err := r.snap(ctx)
	if err != nil {
		return peers.Sample{}, err
	}
	var stop atomic.Bool
	var seq, total atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	t := time.AfterFunc(d, func() { stop.Store(true) })
	defer t.Stop()
	for range callers {
		wg.Go(func() {
			var n int64
			for !stop.Load() {
				if err := f(ctx, seq.Add(1)); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return peers.Sample{}, first
	}
	after, err := r.snap(ctx)
	if err != nil {
		return peers.Sample{}, err
	}
	return peers.Sample{Ops: total.Load(), Elapsed: elapsed, Server: peers.Work(before.stats, after.stats, skipCommands...),
		CPUUsec: after.cpu - before.cpu}, nil
}

// keyer returns a fresh key space for one measurement: key(n) is distinct for every n and from every
// other measurement's keys.
func (r *runner) keyer(tag string) func(n int64) string {
	p := r.prefix + ":" + tag + ":" + strconv.FormatInt(r.sample.Add(1), 10) + ":"
	return func(n int64) string { return p + strconv.FormatInt(n, 10) }
}

// allocs runs f ops times on this goroutine and returns runtime.MemStats.Mallocs per operation (every
// goroutine's allocations meanwhile, the client's background reader and writer included), less the
// runner's own allocations per operation (the key of each operation): keyOnly is f without the
// contender's call.
func allocs(ctx context.Context, ops int, f, keyOnly op) (float64, error) {
	base, err := mallocs(ctx, ops, keyOnly)
	if err != nil {
		return 0, err
	}
	n, err := mallocs(ctx, ops, f)
	return max(n-base, 0), err
}

// mallocs runs f ops times on this goroutine and returns runtime.MemStats.Mallocs per operation.
func mallocs(ctx context.Context, ops int, f op) (float64, error) {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	for n := range ops {
		if err := f(ctx, int64(n)); err != nil {
			return 0, err
		}
	}
	runtime.ReadMemStats(&b)
	return float64(b.Mallocs-a.Mallocs) / float64(ops), nil
}

// lockSection measures lock cycles of every lock contender at every caller count.
func (r *runner) lockSection(ctx context.Context, srv contenders.Server) ([]peers.Throughput, []peers.Allocs, []peers.Instructions, error) {
	return r.lockTable(ctx, srv, sectionLock, contenders.Locks, "Lock cycles (TryAcquire + Release)", contenders.RawRueidis, contenders.Rueidislock,
		"Lock cycle client allocations (one goroutine)", "Lock cycle client instructions")
}

// lockTable measures lock cycles of every contender of specs at every caller count, with ratios
// against the rows ceiling and peer; section names the instruction phase's contenders (only the lock
// section has one).
func (r *runner) lockTable(ctx context.Context, srv contenders.Server, section string, specs []contenders.LockSpec, title, ceiling, peer, allocTitle, instrTitle string) ([]peers.Throughput, []peers.Allocs, []peers.Instructions, error) {
	locks, closeAll, err := contenders.Build(specs, srv)
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeAll()
	cycle := r.lockOp
	names := contenders.Names(specs)
	maxCallers := r.cfg.callers[len(r.cfg.callers)-1]
	for _, name := range names {
		if _, err := r.measure(ctx, maxCallers, r.cfg.warmup, cycle(locks[name], "lw")); err != nil {
			return nil, nil, nil, fmt.Errorf("%s warm-up: %w", name, err)
		}
	}
	samples := map[string]map[int][]peers.Sample{}
	for round := range r.cfg.rounds {
		for _, callers := range r.cfg.callers {
			for _, name := range peers.Rotate(names, round) {
				s, err := r.measure(ctx, callers, r.cfg.duration, cycle(locks[name], "l"))
				if err != nil {
					return nil, nil, nil, fmt.Errorf("%s, %d callers: %w", name, callers, err)
				}
				if samples[name] == nil {
					samples[name] = map[int][]peers.Sample{}
				}
				samples[name][callers] = append(samples[name][callers], s)
			}
		}
		logf(r.out, "lock: round %d/%d done", round+1, r.cfg.rounds)
	}
	var rows []peers.Throughput
	for _, callers := range r.cfg.callers {
		for _, name := range names {
			rows = append(rows, peers.Summarize(name, "", callers, samples[name][callers]))
		}
	}
	peers.SetRatios(rows, ceiling, peer)
	return r.report(ctx, section, "", names, title, "cycles/s", ceiling, peer, allocTitle, instrTitle, rows,
		func(name string) (op, op) { return cycle(locks[name], "la"), r.keyOnlyOp("lk") })
}

// lockOp returns the lock-cycle operation of l: one TryAcquireRelease on a fresh key (tag names the
// measurement in the key).
func (r *runner) lockOp(l contenders.Lock, tag string) op {
	key := r.keyer(tag)
	return func(ctx context.Context, n int64) error { return l.TryAcquireRelease(ctx, key(n)) }
}

// keyOnlyOp returns the runner's own part of lockOp: the key, used, so that it is built (the
// baseline of the allocation and instruction phases).
func (r *runner) keyOnlyOp(tag string) op {
	key := r.keyer(tag)
	return func(_ context.Context, n int64) error {
		if key(n) == "" {
			return errors.New("empty key")
		}
		return nil
	}
}

// report measures the allocations of every named contender (ops returns its operation and the
// runner's own part of it, the key-only baseline) and, when on, the instructions of section's
// contenders (keys: the key pattern of the server figures beside them), and prints the throughput,
// allocation and instruction tables.
func (r *runner) report(ctx context.Context, section, keys string, names []string, title, unit, ceiling, peer, allocTitle, instrTitle string,
	rows []peers.Throughput, ops func(name string) (f, keyOnly op)) ([]peers.Throughput, []peers.Allocs, []peers.Instructions, error) {
	var al []peers.Allocs
	for _, name := range names {
		f, keyOnly := ops(name)
		a, err := allocs(ctx, r.cfg.allocOps, f, keyOnly)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s allocations: %w", name, err)
		}
		al = append(al, peers.Allocs{Contender: name, PerOp: a, Ops: r.cfg.allocOps})
	}
	in, instrTitle := r.instrPhase(ctx, section, instrTitle, names, rows, keys)
	if err := peers.WriteThroughput(r.out, title+", medians of "+strconv.Itoa(r.cfg.rounds)+" rounds", unit, ceiling, peer, rows); err != nil {
		return nil, nil, nil, err
	}
	if err := peers.WriteAllocs(r.out, allocTitle, al); err != nil {
		return nil, nil, nil, err
	}
	if in != nil {
		if err := peers.WriteInstructions(r.out, instrTitle, in); err != nil {
			return nil, nil, nil, err
		}
	}
	return rows, al, in, nil
}

// Hand-off timing: the holder keeps the lease handoffSettle plus a random share of handoffJitter
// after the waiter started, so the waiter has made its first attempt and waits when the release
// comes; handoffTimeout bounds one hand-off.
const (
	handoffSettle  = 20 * time.Millisecond
	handoffJitter  = 10 * time.Millisecond
	handoffTimeout = 15 * time.Second
)

// handoffStall is how long a waiter may take after it started before its hand-off counts as a
// stall: counted, not timed (a lost wake-up). A variable for the tests.
var handoffStall = 3 * time.Second

// handoffSection measures the contended hand-off of every hand-off contender.
func (r *runner) handoffSection(ctx context.Context, srv contenders.Server) ([]peers.Handoff, error) {
	hs, closeAll, err := contenders.Build(contenders.Handoffs, srv)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	names := contenders.HandoffNames()
	for _, name := range names { // warm-up: scripts loaded, connections made
		if _, _, err := r.handoffs(ctx, hs[name], 2); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", name, err)
		}
	}
	lat := map[string][]time.Duration{}
	stalls := map[string]int{}
	cmds := map[string][]float64{}
	for round := range r.cfg.rounds {
		for _, name := range peers.Rotate(names, round) {
			before, err := r.snap(ctx)
			if err != nil {
				return nil, err
			}
			l, st, err := r.handoffs(ctx, hs[name], r.cfg.handoffs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			stalls[name] += st
			after, err := r.snap(ctx)
			if err != nil {
				return nil, err
			}
			lat[name] = append(lat[name], l...)
			cmds[name] = append(cmds[name], float64(peers.Delta(before.stats, after.stats, skipCommands...).Calls)/float64(r.cfg.handoffs))
		}
		logf(r.out, "hand-off: round %d/%d done", round+1, r.cfg.rounds)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var rows []peers.Handoff
	for _, name := range names {
		rows = append(rows, peers.Handoff{Contender: name, Count: len(lat[name]), Stalls: stalls[name], P50Ms: ms(peers.Quantile(lat[name], 0.50)),
			P99Ms: ms(peers.Quantile(lat[name], 0.99)), CommandsPerHandoff: peers.Median(cmds[name])})
	}
	peers.SetHandoffRatios(rows, contenders.RawRueidis, contenders.Rueidislock)
	return rows, peers.WriteHandoff(r.out, "Contended hand-off: holder's release call -> waiter's acquisition returned, all rounds",
		contenders.RawRueidis, contenders.Rueidislock, rows)
}

// handoffs runs n hand-offs of h on fresh keys and returns the latencies of those whose waiter
// acquired, and how many stalled (the waiter not woken within handoffStall).
func (r *runner) handoffs(ctx context.Context, h contenders.Handoff, n int) ([]time.Duration, int, error) {
	key := r.keyer("h")
	type acquired struct {
		release contenders.Release
		err     error
		at      time.Time
	}
	out := make([]time.Duration, 0, n)
	stalls := 0
	for i := range n {
		if err := func() error {
			ctx, cancel := context.WithTimeout(ctx, handoffTimeout)
			defer cancel()
			k := key(int64(i))
			release, err := h.Hold(ctx, k)
			if err != nil {
				return fmt.Errorf("hold: %w", err)
			}
			done := make(chan acquired, 1)
			wctx, wcancel := context.WithTimeout(ctx, handoffStall)
			defer wcancel()
			go func() {
				rel, err := h.Wait(wctx, k)
				done <- acquired{rel, err, time.Now()}
			}()
			time.Sleep(handoffSettle + rand.N(handoffJitter))
			start := time.Now()
			if err := release(ctx); err != nil {
				return fmt.Errorf("holder's release: %w", err)
			}
			a := <-done
			if a.err != nil && wctx.Err() != nil && ctx.Err() == nil {
				stalls++ // released, never woken
				return nil
			}
			if a.err != nil {
				return fmt.Errorf("wait: %w", a.err)
			}
			out = append(out, a.at.Sub(start))
			if err := a.release(ctx); err != nil {
				return fmt.Errorf("waiter's release: %w", err)
			}
			return nil
		}(); err != nil {
			return nil, 0, err
		}
	}
	return out, stalls, nil
}

// gcraSection measures GCRA decisions of every decider, hot key and spread keys, at every caller
// count.
func (r *runner) gcraSection(ctx context.Context, srv contenders.Server) ([]peers.Throughput, []peers.Allocs, []peers.Instructions, error) {
	ds, closeAll, err := contenders.Build(contenders.Deciders, srv)
	if err != nil {
		return nil, nil, nil, err
	}
	defer closeAll()
	decide := r.gcraOp
	names := contenders.DeciderNames()
	maxCallers := r.cfg.callers[len(r.cfg.callers)-1]
	for _, name := range names {
		if _, err := r.measure(ctx, maxCallers, r.cfg.warmup, decide(ds[name], keysSpread)); err != nil {
			return nil, nil, nil, fmt.Errorf("%s warm-up: %w", name, err)
		}
	}
	type cell struct {
		keys    string
		callers int
	}
	samples := map[string]map[cell][]peers.Sample{}
	for round := range r.cfg.rounds {
		for _, pattern := range []string{keysHot, keysSpread} {
			for _, callers := range r.cfg.callers {
				for _, name := range peers.Rotate(names, round) {
					s, err := r.measure(ctx, callers, r.cfg.duration, decide(ds[name], pattern))
					if err != nil {
						return nil, nil, nil, fmt.Errorf("%s, %s, %d callers: %w", name, pattern, callers, err)
					}
					if samples[name] == nil {
						samples[name] = map[cell][]peers.Sample{}
					}
					c := cell{pattern, callers}
					samples[name][c] = append(samples[name][c], s)
				}
			}
		}
		logf(r.out, "gcra: round %d/%d done", round+1, r.cfg.rounds)
	}
	var rows []peers.Throughput
	for _, pattern := range []string{keysHot, keysSpread} {
		for _, callers := range r.cfg.callers {
			for _, name := range names {
				rows = append(rows, peers.Summarize(name, pattern, callers, samples[name][cell{pattern, callers}]))
			}
		}
	}
	peers.SetRatios(rows, contenders.RawGCRA, contenders.RedisRate)
	return r.report(ctx, sectionGCRA, keysHot, names, "GCRA decisions", "decisions/s", contenders.RawGCRA, contenders.RedisRate, "GCRA decision client allocations (one goroutine, hot key)", "GCRA decision client instructions, hot key", rows,
		func(name string) (op, op) { return decide(ds[name], keysHot), noOp })
}

// noOp is the runner's own part of gcraOp: nothing (its keys are built beforehand).
func noOp(context.Context, int64) error { return nil }

// gcraOp returns the GCRA decision operation of d on fresh keys of pattern (keysHot: one key;
// keysSpread: round-robin over spreadKeys keys).
func (r *runner) gcraOp(d contenders.Decider, pattern string) op {
	key := r.keyer("g")
	n := int64(1)
	if pattern == keysSpread {
		n = spreadKeys
	}
	names := make([]string, n)
	for i := range names {
		names[i] = "{" + key(int64(i)) + "}" // one slot per key: Keyed accepts it as is
	}
	return func(ctx context.Context, i int64) error {
		ok, err := d.Decide(ctx, names[i%n])
		if err == nil && !ok {
			err = errors.New("refused: every decision of a run is sized to admit")
		}
		return err
	}
}

// cleanup deletes this run's keys from every node (SCAN + UNLINK; errors are printed, not returned).
func (r *runner) cleanup(ctx context.Context) {
	for _, n := range r.nodes {
		c, err := rueidis.NewClient(contenders.FromTestkit(n).Option)
		if err != nil {
			logf(r.out, "cleanup: %v", err)
			continue
		}
		if err := unlinkMatching(ctx, c, "*"+r.prefix+"*"); err != nil {
			logf(r.out, "cleanup: %v", err)
		}
		c.Close()
	}
}

// unlinkMatching deletes the keys matching pattern, one UNLINK per key (a cluster node refuses a
// multi-key UNLINK across slots).
func unlinkMatching(ctx context.Context, c rueidis.Client, pattern string) error {
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return err
		}
		cmds := make(rueidis.Commands, 0, len(e.Elements))
		for _, k := range e.Elements {
			cmds = append(cmds, c.B().Unlink().Key(k).Build())
		}
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return nil
		}
	}
}
