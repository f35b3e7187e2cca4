package faults_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
)

const (
	// EnvSeed replays a run: the seed of the fault schedule (and of the workers' choices).
	EnvSeed = "COORDKIT_FAULT_SEED"
	// EnvDuration sets how long the nemesis runs per target (a Go duration; default 12s).
	EnvDuration = "COORDKIT_FAULT_DURATION"
)

// faultTargets are the matrix targets the suite runs on.
var faultTargets = map[string]bool{"redis8": true, "valkey9": true, "redis-cluster": true}

func baseSeed(t *testing.T) uint64 {
	if s := strings.TrimSpace(os.Getenv(EnvSeed)); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

func nemesisSpan(t *testing.T) time.Duration {
	if s := strings.TrimSpace(os.Getenv(EnvDuration)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", EnvDuration, s)
		}
		return d
	}
	return 12 * time.Second
}

// TestFaults runs the five workloads together under the nemesis on each selected target of redis8,
// valkey9 and redis-cluster, one target at a time, then checks the history (see the package doc).
func TestFaults(t *testing.T) {
	seed := baseSeed(t)
	span := nemesisSpan(t)
	t.Logf("fault seed %d (replay: %s=%d)", seed, EnvSeed, seed)
	ran := false
	for _, mt := range matrix.Targets() {
		if !faultTargets[mt.Name] {
			continue
		}
		ran = true
		h := fnv.New64a()
		h.Write([]byte(mt.Name))
		tseed := seed ^ h.Sum64()
		t.Run(mt.Name, func(t *testing.T) { runTarget(t, mt, tseed, span) })
	}
	if !ran {
		if os.Getenv("CI") == "true" {
			t.Fatal("no fault target selected (redis8, valkey9, redis-cluster): see COORDKIT_TARGETS / COORDKIT_CLUSTERS")
		}
		t.Log("no fault target selected (redis8, valkey9, redis-cluster): see COORDKIT_TARGETS / COORDKIT_CLUSTERS")
	}
}

func runTarget(t *testing.T, mt matrix.Target, seed uint64, span time.Duration) {
	began := time.Now()
	tg := startTarget(t, mt)
	t.Cleanup(func() { _ = tg.healAll() }) // never leave a process stopped
	server := ""
	if tg.Cluster != nil {
		server = fmt.Sprintf("%s %s, %d nodes", tg.Cluster.Flavor, tg.Cluster.Version, len(tg.Nodes))
	} else {
		server = fmt.Sprintf("%s %s", tg.Srv.Flavor, tg.Srv.Version)
	}
	sched := schedule(seed, span, len(tg.Nodes), numClients)

	rec := newRecorder()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	r := &run{rec: rec, seed: seed, ctx: ctx}

	locks := &lockLoad{name: "faults-lock", ttl: 400 * time.Millisecond}
	leaders := &leaderLoad{name: "faults-leader"}
	idem := &idemLoad{}
	counters := &counterLoad{}

	var wg sync.WaitGroup
	var errMu sync.Mutex
	var werrs []string
	spawn := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil {
				errMu.Lock()
				werrs = append(werrs, name+": "+err.Error())
				errMu.Unlock()
			}
		}()
	}
	// Eight workers, and three election candidates; clients are shared so that a fault on one client
	// hits several workloads.
	for w := range 2 {
		spawn("lock", func() error { return locks.worker(r, w, tg.client(w)) })
		spawn("idem", func() error { return idem.worker(r, w, tg.client(2+w)) })
		spawn("rate", func() error { return rateWorker(r, w, tg.client(3+w)) })
		spawn("counter", func() error { return counters.worker(r, w, tg.client(1+w)) })
	}
	if err := leaders.start(r, []rueidis.Client{tg.client(0), tg.client(1), tg.client(2)}); err != nil {
		stop()
		wg.Wait()
		_ = leaders.stop()
		t.Fatalf("leader: %v", err)
	}
	spawn("leader sampler", func() error { leaders.sample(ctx, r); return nil })

	nem := &nemesis{tg: tg, rec: rec, leader: func() int { return int(leaders.last.Load()) % numClients }}
	sleepCtx(ctx, 300*time.Millisecond) // warm-up without faults
	nemCtx, nemStop := context.WithTimeout(ctx, span)
	nem.run(nemCtx, sched)
	nemStop()
	if err := tg.healAll(); err != nil {
		t.Errorf("healing: %v", err)
	}
	rec.add(event{W: "nemesis", Op: "healed"})
	sleepCtx(context.Background(), 300*time.Millisecond) // a calm end: operations succeed again
	stop()
	wg.Wait()
	if err := leaders.stop(); err != nil {
		t.Errorf("leader: %v", err)
	}
	if len(werrs) > 0 {
		t.Errorf("workers: %s", strings.Join(werrs, "; "))
	}
	if err := nem.err(); err != nil {
		t.Errorf("nemesis: %v", err)
	}

	// No lease left: every lock and leader lease is released or expires within its TTL (an
	// uncertain acquisition may hold one that long); none is ever without expiry.
	h := rec.history()
	var vs []violation
	lockLease, _ := lock.Keys(locks.name)
	leaderLease, _ := lock.Keys(leaders.name)
	for _, k := range []struct {
		key, w string
		ttl    time.Duration
	}{{lockLease, "lock", locks.ttl}, {leaderLease, "leader", time.Second}} {
		if v := waitGone(tg, k.key, k.ttl+2*time.Second); v != "" {
			vs = append(vs, violation{k.w, v, lastSeq(h, k.w)})
		}
	}
	for _, k := range counters.keyList() {
		v, err := tg.Raw.Do(context.Background(), tg.Raw.B().Get().Key(k).Build()).AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Errorf("reading %s: %v", k, err)
		} else if v > counterLimit || v < counterFloor {
			vs = append(vs, violation{"counter", fmt.Sprintf("key %s ends at %d, outside [%d, %d]", k, v, counterFloor, counterLimit), lastSeq(h, "counter")})
		}
	}

	vs = append(vs, checkLock(h)...)
	vs = append(vs, checkLeader(h)...)
	vs = append(vs, checkIdem(h, idemRetained())...)
	vs = append(vs, checkRate(h, ratePolicy.Limit, ratePolicy.Window)...)
	cvs, lin := checkCounter(h, counterLimit, counterFloor, 3*time.Second)
	vs = append(vs, cvs...)

	report(t, mt.Name, server, seed, h, nem, sched, leaders, lin, vs, time.Since(began))
	workloadOf := map[string]string{"lock": "lock", "leader": "leader", "idempotency": "idem", "ratelimit": "rate", "counter": "counter"}
	shown := map[string]int{}
	for _, v := range vs {
		w := workloadOf[v.Checker]
		if w == "" {
			w = v.Checker
		}
		if shown[v.Checker]++; shown[v.Checker] > 3 {
			continue
		}
		t.Errorf("VIOLATION (%s, seed %d): %s\nhistory excerpt:\n%s", v.Checker, seed, v.Msg, excerpt(h, w, v))
	}
	if n := len(vs); n > 0 {
		t.Errorf("%d violations on %s; replay the fault schedule with %s=%d (this target's seed is derived from it)", n, mt.Name, EnvSeed, seed)
	}
}

func lastSeq(h []event, w string) []int64 {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].W == w {
			return []int64{h[i].Seq}
		}
	}
	return nil
}

// waitGone waits until key is absent, up to bound; it returns a description of a violation: the key
// without expiry, or still present after bound.
func waitGone(tg *target, key string, bound time.Duration) string {
	deadline := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pttl, err := tg.Raw.Do(ctx, tg.Raw.B().Pttl().Key(key).Build()).AsInt64()
		cancel()
		switch {
		case err == nil && pttl == -2:
			return ""
		case err == nil && pttl == -1:
			return fmt.Sprintf("lease left: %s has no expiry", key)
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("lease left: %s still present (PTTL %d, err %v) %v after the end", key, pttl, err, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func report(t *testing.T, name, server string, seed uint64, h []event, nem *nemesis, sched []fault, leaders *leaderLoad, lin []linResult, vs []violation, took time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s), seed %d, %v\n", name, server, seed, took.Round(time.Millisecond))
	for _, w := range []string{"lock", "leader", "idem", "rate", "counter"} {
		c := count(h, w)
		if w == "leader" {
			fmt.Fprintf(&b, "  %-8s (no operations of its own: elections run inside the library)", w)
		} else {
			fmt.Fprintf(&b, "  %-8s ops ok %d / failed %d / uncertain %d", w, c.ok, c.failed, c.uncertain)
		}
		switch w {
		case "lock":
			var acq, acc, zombie, zombieRejected int
			for _, e := range filter(h, "lock", "acquire", "write") {
				switch {
				case e.Op == "acquire" && e.Flag:
					acq++
				case e.Op == "write" && e.Flag2 && e.Flag:
					acc++
				case e.Op == "write" && !e.Flag2:
					zombie++
					if !e.Flag {
						zombieRejected++
					}
				}
			}
			fmt.Fprintf(&b, "; %d leases, %d holder writes accepted, %d of %d writes after the lease rejected; %d writes skipped with Err() nil but Remaining() 0",
				acq, acc, zombieRejected, zombie, len(filter(h, "lock", "estimate-disagrees")))
		case "leader":
			terms := map[int64]bool{}
			for _, e := range filter(h, "leader", "elected") {
				terms[e.Token] = true
			}
			var obs int
			for _, e := range filter(h, "leader", "sample", "observe") {
				if e.Flag {
					obs++
				}
			}
			fmt.Fprintf(&b, "; %d terms, %d sampling instants, %d leading observations", len(terms), leaders.samples.Load(), obs)
		case "idem":
			var runs, replays int
			for _, e := range filter(h, "idem", "run-start", "begin") {
				if e.Op == "run-start" {
					runs++
				} else if e.Str == "completed" {
					replays++
				}
			}
			fmt.Fprintf(&b, "; %d handler runs, %d replays", runs, replays)
		case "rate":
			var adm int
			for _, e := range filter(h, "rate", "allow") {
				if e.Out == ok && e.Flag {
					adm++
				}
			}
			fmt.Fprintf(&b, "; %d admitted", adm)
		case "counter":
			byResult := map[string]int{}
			var ops int
			var slowest time.Duration
			for _, l := range lin {
				byResult[string(l.result)]++
				ops += l.ops
				slowest = max(slowest, l.took)
			}
			fmt.Fprintf(&b, "; linearizability of %d keys (%d ops): Ok %d, Unknown (timed out) %d, Illegal %d; slowest check %v",
				len(lin), ops, byResult["Ok"], byResult["Unknown"], byResult["Illegal"], slowest.Round(time.Millisecond))
		}
		b.WriteString("\n")
	}
	kinds := make([]string, 0, len(nem.counts))
	for k, n := range nem.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(&b, "  faults: %s (%d scheduled)\n", strings.Join(kinds, ", "), len(sched))
	byChecker := map[string]int{}
	for _, v := range vs {
		byChecker[v.Checker]++
	}
	fmt.Fprintf(&b, "  violations: %d %v", len(vs), byChecker)
	t.Log(b.String())
}
