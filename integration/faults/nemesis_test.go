package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// faultKind is one kind of fault the nemesis injects.
type faultKind string

const (
	faultPause   faultKind = "pause"   // SIGSTOP one server process (a node of a cluster) for Dur, then SIGCONT
	faultLatency faultKind = "latency" // every reply to one client delayed by Delay, for Dur
	faultCut     faultKind = "cut"     // every connection of one client closed (it reconnects at once)
	faultDrop    faultKind = "drop"    // one client's replies swallowed for Dur (requests still run)
	faultRefuse  faultKind = "refuse"  // one client partitioned: connections closed, dials refused, for Dur
)

var faultKinds = []faultKind{faultPause, faultLatency, faultCut, faultDrop, faultRefuse}

// leaderClient as a fault's Target: the client of the candidate that was elected last, resolved when
// the fault starts.
const leaderClient = -1

// fault is one step of the nemesis schedule: wait Gap, inject Kind on Target (a node index for pause,
// a client index or leaderClient otherwise) for Dur, heal.
type fault struct {
	Gap    time.Duration
	Kind   faultKind
	Target int
	Dur    time.Duration
	Delay  time.Duration // latency only
}

func (f fault) String() string {
	s := fmt.Sprintf("%s target=%d for %v", f.Kind, f.Target, f.Dur)
	if f.Target == leaderClient {
		s = fmt.Sprintf("%s target=leader for %v", f.Kind, f.Dur)
	}
	if f.Kind == faultLatency {
		s += fmt.Sprintf(" delay=%v", f.Delay)
	}
	return s
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Truncate(time.Millisecond)
}

// schedule derives the fault schedule from seed alone: faults one after another, each after a gap of
// 100-500ms, until their gaps and durations fill span. The same seed, node count and client count
// give the same schedule.
func schedule(seed uint64, span time.Duration, nodes, clients int) []fault {
	r := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	var out []fault
	for total := time.Duration(0); total < span; {
		f := fault{Gap: between(r, 100*time.Millisecond, 500*time.Millisecond), Kind: faultKinds[r.IntN(len(faultKinds))]}
		switch f.Kind {
		case faultPause:
			f.Target, f.Dur = r.IntN(nodes), between(r, 100*time.Millisecond, time.Second)
		case faultLatency:
			f.Target, f.Dur, f.Delay = r.IntN(clients), between(r, 300*time.Millisecond, time.Second), between(r, 50*time.Millisecond, 400*time.Millisecond)
		case faultCut:
			f.Target = r.IntN(clients)
		case faultDrop:
			f.Target, f.Dur = r.IntN(clients), between(r, 100*time.Millisecond, 500*time.Millisecond)
		case faultRefuse:
			f.Target, f.Dur = r.IntN(clients), between(r, 200*time.Millisecond, time.Second)
			if r.IntN(2) == 0 {
				f.Target = leaderClient
			}
		}
		total += f.Gap + f.Dur
		out = append(out, f)
	}
	return out
}

// faultTarget is what the nemesis acts on: server processes and per-client proxies.
type faultTarget interface {
	pauseNode(i int) error
	resumeNode(i int) error
	proxyFault(client int, kind faultKind, delay time.Duration) error
	healClient(client int, kind faultKind) error
	healAll() error
}

// nemesis runs a schedule against a faultTarget and records every step in the history.
type nemesis struct {
	tg     faultTarget
	rec    *recorder
	leader func() int // the client of the last elected leader (or 0)

	mu     sync.Mutex
	counts map[faultKind]int
	errs   []error
}

func (n *nemesis) run(ctx context.Context, sched []fault) {
	n.counts = map[faultKind]int{}
	for _, f := range sched {
		if !sleepCtx(ctx, f.Gap) {
			return
		}
		target := f.Target
		if target == leaderClient {
			target = n.leader()
		}
		var err error
		if f.Kind == faultPause {
			err = n.tg.pauseNode(target)
		} else {
			err = n.tg.proxyFault(target, f.Kind, f.Delay)
		}
		n.rec.add(event{W: "nemesis", Worker: target, Op: string(f.Kind) + "-start", Str: f.String(), Err: errString(err)})
		n.mu.Lock()
		n.counts[f.Kind]++
		if err != nil {
			n.errs = append(n.errs, fmt.Errorf("%s: %w", f, err))
		}
		n.mu.Unlock()
		if f.Kind == faultCut {
			continue
		}
		// Heal after Dur even when the run ends meanwhile.
		sleepCtx(ctx, f.Dur)
		if f.Kind == faultPause {
			err = n.tg.resumeNode(target)
		} else {
			err = n.tg.healClient(target, f.Kind)
		}
		n.rec.add(event{W: "nemesis", Worker: target, Op: string(f.Kind) + "-end", Err: errString(err)})
		if err != nil {
			n.mu.Lock()
			n.errs = append(n.errs, fmt.Errorf("healing %s: %w", f, err))
			n.mu.Unlock()
		}
	}
}

func (n *nemesis) err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return errors.Join(n.errs...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sleepCtx sleeps d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
