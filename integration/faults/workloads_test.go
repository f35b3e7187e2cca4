package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/testkit/fence"
)

// opTimeout bounds every operation a worker sends: a paused server, dropped replies or a long delay
// end it as uncertain.
const opTimeout = 300 * time.Millisecond

// classify turns an operation's error into its outcome: nil is ok, an error matching
// luakit.ErrUncertain is uncertain, any other error is a failure (nothing happened).
func classify(err error) outcome {
	switch {
	case err == nil:
		return ok
	case errors.Is(err, luakit.ErrUncertain):
		return uncertain
	}
	return failed
}

func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// workerRand returns worker w's random source for a run with seed (its choices of keys, deltas and
// pauses; the interleaving with the servers is never the same twice).
func workerRand(seed uint64, workload string, w int) *rand.Rand {
	var h uint64 = 14695981039346656037
	for _, c := range workload {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h+uint64(w)))
}

func pause(ctx context.Context, r *rand.Rand, lo, hi time.Duration) bool {
	return sleepCtx(ctx, between(r, lo, hi))
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// run is one target's run: the recorder and the context that ends the workers.
type run struct {
	rec  *recorder
	seed uint64
	ctx  context.Context
}

// ---- lock with a fenced store ----

// lockLoad: workers take one named lock with TryAcquire, write to a fenced store (testkit/fence.Fence) while
// their estimate says they hold it (Remaining() > 0, read under the store's lock), renew sometimes,
// release or abandon the lease, and sometimes write again with the old token after the lease ended
// (a paused process waking up): the store must reject that write once a newer token was accepted.
type lockLoad struct {
	name  string
	ttl   time.Duration
	mu    sync.Mutex
	fence fence.Fence[int64]
	ids   atomic.Int64
	// acceptStale breaks the store on purpose (it accepts every write); only for showing that the
	// checker fails. Never true in a commit.
	acceptStale bool
	// ack is the workers' lock.WithReplicaAck (the failover loop); zero: none.
	ack luakit.ReplicaAck
}

func (l *lockLoad) write(r *run, w int, lease *lock.Lease, id int64, checkHolding bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	holding := checkHolding && lease.Remaining() > 0
	if checkHolding && !holding && lease.Err() == nil {
		// The estimate elapsed but the handle has not ended yet (its timer is late): noted, not a
		// violation; the holder does not write.
		r.rec.add(event{W: "lock", Worker: w, Op: "estimate-disagrees", Key: l.name, Token: lease.FencingToken(), Val: id})
	}
	accepted := false
	if holding || !checkHolding {
		accepted = l.fence.TryWrite(lease.FencingToken(), id) || l.acceptStale
	}
	r.rec.add(event{W: "lock", Worker: w, Op: "write", Key: l.name, Token: lease.FencingToken(), Val: id, Flag: accepted, Flag2: holding})
}

func (l *lockLoad) worker(r *run, w int, c rueidis.Client) error {
	lk, err := lock.New(c, lock.WithLogger(discard), lock.WithReplicaAck(l.ack))
	if err != nil {
		return err
	}
	rnd := workerRand(r.seed, "lock", w)
	for r.ctx.Err() == nil {
		cs, ct := r.rec.now()
		ctx, cancel := opCtx()
		lease, err := lk.TryAcquire(ctx, l.name, l.ttl)
		cancel()
		e := event{W: "lock", Worker: w, Op: "acquire", Key: l.name, CallSeq: cs, Call: ct, Out: classify(err), Err: errString(err)}
		switch {
		case err == nil:
			e.Flag, e.Token, e.Val = true, lease.FencingToken(), l.ids.Add(1)
		case errors.Is(err, lock.ErrNotAcquired):
			e.Out, e.Err = ok, ""
		}
		r.rec.add(e)
		if !e.Flag {
			pause(r.ctx, rnd, 2*time.Millisecond, 20*time.Millisecond)
			continue
		}
		l.hold(r, w, rnd, lease, e.Val)
	}
	return nil
}

func (l *lockLoad) hold(r *run, w int, rnd *rand.Rand, lease *lock.Lease, id int64) {
	for range 1 + rnd.IntN(4) {
		l.write(r, w, lease, id, true)
		sleepCtx(context.Background(), between(rnd, 5*time.Millisecond, 60*time.Millisecond))
		if rnd.IntN(3) == 0 {
			cs, ct := r.rec.now()
			ctx, cancel := opCtx()
			held, err := lease.Extend(ctx)
			cancel()
			r.rec.add(event{W: "lock", Worker: w, Op: "extend", Key: l.name, CallSeq: cs, Call: ct, Out: classify(err), Token: lease.FencingToken(), Val: id, Flag: held, Err: errString(err)})
		}
	}
	if rnd.IntN(4) > 0 {
		cs, ct := r.rec.now()
		ctx, cancel := opCtx()
		res, err := lease.Release(ctx)
		cancel()
		r.rec.add(event{W: "lock", Worker: w, Op: "release", Key: l.name, CallSeq: cs, Call: ct, Out: classify(err), Token: lease.FencingToken(), Val: id, Str: fmt.Sprint(res), Err: errString(err)})
	} else {
		// Abandoned, as by a crashed owner: the lease expires on the server after its TTL.
		r.rec.add(event{W: "lock", Worker: w, Op: "abandon", Key: l.name, Token: lease.FencingToken(), Val: id})
	}
	if rnd.IntN(3) == 0 {
		sleepCtx(context.Background(), between(rnd, 0, l.ttl))
		l.write(r, w, lease, id, false) // a zombie write with the old token
	}
}

// ---- leader terms ----

// leaderLoad: candidates of one election on different clients. Each elected callback checks its
// Term.Err under the shared lock every few milliseconds and sometimes relinquishes; a sampler reads
// Election.Current of every candidate under the same lock. Only leading observations are recorded.
type leaderLoad struct {
	name    string
	mu      sync.Mutex
	els     []*leader.Election
	last    atomic.Int64 // the candidate elected last
	samples atomic.Int64
	// skipCheck breaks the callbacks on purpose: they report leading without asking their term; only
	// for showing that the checker fails. Never true in a commit.
	skipCheck bool
}

func (l *leaderLoad) start(r *run, clients []rueidis.Client) error {
	for i, c := range clients {
		rnd := workerRand(r.seed, "leader", i)
		el, err := leader.New(c, l.name,
			leader.WithLeaseDuration(time.Second),
			leader.WithRetryDelay(50*time.Millisecond),
			leader.WithCleanupTimeout(300*time.Millisecond),
			leader.WithLogger(discard),
			leader.OnElected(func(ctx context.Context, term leader.Term) error { return l.lead(r, i, rnd, ctx, term) }),
			leader.OnChange(func(ch leader.Change) {
				if ch.State == leader.Elected {
					l.last.Store(int64(i))
				}
				r.rec.add(event{W: "leader", Worker: i, Op: ch.State.String(), Token: ch.Term.FencingToken, Err: errString(ch.Cause)})
			}))
		if err != nil {
			return err
		}
		l.els = append(l.els, el)
	}
	for _, el := range l.els {
		if err := el.Start(r.ctx); err != nil {
			return err
		}
	}
	return nil
}

func (l *leaderLoad) lead(r *run, i int, rnd *rand.Rand, ctx context.Context, term leader.Term) error {
	l.mu.Lock()
	relinquish := time.Now().Add(between(rnd, 200*time.Millisecond, 3*time.Second))
	l.mu.Unlock()
	for {
		l.mu.Lock()
		leading := l.skipCheck || term.Err() == nil
		if leading {
			r.rec.add(event{W: "leader", Worker: i, Op: "observe", Token: term.FencingToken, Flag: true})
		}
		l.mu.Unlock()
		if !leading || time.Now().After(relinquish) {
			return nil
		}
		select {
		case <-ctx.Done():
			if !l.skipCheck {
				return nil
			}
		case <-time.After(3 * time.Millisecond):
		}
	}
}

// sample reads every candidate's Current under the lock until ctx ends.
func (l *leaderLoad) sample(ctx context.Context, r *run) {
	for sleepCtx(ctx, 2*time.Millisecond) {
		l.mu.Lock()
		for i, el := range l.els {
			if term, leading := el.Current(); leading {
				r.rec.add(event{W: "leader", Worker: i, Op: "sample", Token: term.FencingToken, Flag: true})
			}
		}
		l.samples.Add(1)
		l.mu.Unlock()
	}
}

func (l *leaderLoad) stop() error {
	var errs []error
	for _, el := range l.els {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := el.Stop(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ---- idempotency executions ----

// idemLoad: workers claim keys from a sliding window of a few keys with TryBegin; a Started claim runs
// a handler (its start and end recorded under the run registry's lock, each noting whether the claim's
// Deadline had passed), then completes with the run's id as the result (or abandons, sometimes).
// Completed attempts record the replayed bytes.
type idemLoad struct {
	mu   sync.Mutex
	ops  atomic.Int64
	runs atomic.Int64
}

var stateNames = map[idempotency.State]string{
	idempotency.Started: "started", idempotency.Completed: "completed",
	idempotency.InProgress: "inprogress", idempotency.FingerprintMismatch: "mismatch",
}

func (l *idemLoad) worker(r *run, w int, c rueidis.Client) error {
	st, err := idempotency.New(c)
	if err != nil {
		return err
	}
	rnd := workerRand(r.seed, "idem", w)
	for r.ctx.Err() == nil {
		key := fmt.Sprintf("idem:%d", l.ops.Add(1)/8+int64(rnd.IntN(3)))
		cs, ct := r.rec.now()
		sent := time.Now()
		ctx, cancel := opCtx()
		a, err := st.TryBegin(ctx, key, idemLease, idempotency.NoFingerprint)
		cancel()
		e := event{W: "idem", Worker: w, Op: "begin", Key: key, CallSeq: cs, Call: ct, Out: classify(err), Err: errString(err)}
		if err == nil {
			e.Str, e.Val = stateNames[a.State], a.Generation
			if a.State == idempotency.Completed {
				e.Res = string(a.Result)
			}
		}
		r.rec.add(e)
		if err == nil && a.State == idempotency.Started {
			l.handle(r, w, rnd, st, key, a.OwnerToken, sent.Add(idemLease-idemMargin))
			continue
		}
		pause(r.ctx, rnd, 2*time.Millisecond, 15*time.Millisecond)
	}
	return nil
}

// handle runs the handler of a Started claim whose lease ends no earlier than deadline on the server.
func (l *idemLoad) handle(r *run, w int, rnd *rand.Rand, st *idempotency.Store, key, owner string, deadline time.Time) {
	id := fmt.Sprintf("w%d-run%d", w, l.runs.Add(1))
	l.mu.Lock()
	within := time.Now().Before(deadline)
	r.rec.add(event{W: "idem", Worker: w, Op: "run-start", Key: key, Str: id, Flag2: within})
	l.mu.Unlock()
	sleepCtx(context.Background(), between(rnd, 5*time.Millisecond, 50*time.Millisecond)) // the work
	l.mu.Lock()
	within = time.Now().Before(deadline)
	r.rec.add(event{W: "idem", Worker: w, Op: "run-end", Key: key, Str: id, Flag2: within})
	l.mu.Unlock()
	cs, ct := r.rec.now()
	ctx, cancel := opCtx()
	defer cancel()
	if rnd.IntN(8) == 0 {
		done, err := st.Abandon(ctx, key, owner)
		r.rec.add(event{W: "idem", Worker: w, Op: "abandon", Key: key, CallSeq: cs, Call: ct, Out: classify(err), Str: id, Flag: done, Err: errString(err)})
		return
	}
	done, err := complete(ctx, st, key, owner, []byte(id))
	r.rec.add(event{W: "idem", Worker: w, Op: "complete", Key: key, CallSeq: cs, Call: ct, Out: classify(err), Str: id, Flag: done, Err: errString(err)})
}

const (
	// idemLease is the claim lease of every TryBegin.
	idemLease = 300 * time.Millisecond
	// idemMargin: a handler counts as running within its claim until the call's send time + idemLease
	// - idemMargin. The server's claim lasts at least from its execution (after the send) for the
	// lease, less up to 1ms because expiry is kept in whole milliseconds of a truncated clock.
	idemMargin = 2 * time.Millisecond
	// idemRetention is how long a completed result is kept where Complete takes a retention.
	idemRetention = time.Minute
)

// complete calls Store.Complete with idemRetention where the Store takes a retention, else with the
// form whose result keeps the claim's lease; it reports which through idemRetained. (The idempotency
// module is gaining the retention argument while this suite is written; both forms compile.)
func complete(ctx context.Context, st *idempotency.Store, key, owner string, result []byte) (bool, error) {
	switch c := any(st).(type) {
	case interface {
		Complete(context.Context, string, string, []byte, time.Duration) (bool, error)
	}:
		return c.Complete(ctx, key, owner, result, idemRetention)
	case interface {
		Complete(context.Context, string, string, []byte) (bool, error)
	}:
		return c.Complete(ctx, key, owner, result)
	}
	panic("idempotency.Store has no Complete method this suite knows")
}

// idemRetained reports whether completed results outlive the run (Complete takes a retention): then a
// key completed once is never started or completed again within the run.
func idemRetained() bool {
	_, ok := any((*idempotency.Store)(nil)).(interface {
		Complete(context.Context, string, string, []byte, time.Duration) (bool, error)
	})
	return ok
}

// ---- rate-limit admissions ----

// ratePolicy is the sliding window every rate worker shares.
var ratePolicy = ratelimit.SlidingWindow{Limit: 8, Window: 200 * time.Millisecond, Segments: 4}

// rateWorker calls Allow on the shared key as fast as a few milliseconds apart and records each
// decision with its server time.
func rateWorker(r *run, w int, c rueidis.Client) error {
	lim, err := ratelimit.New(c, "rate:faults", ratePolicy)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lim.Close(ctx)
	}()
	rnd := workerRand(r.seed, "rate", w)
	for r.ctx.Err() == nil {
		cs, ct := r.rec.now()
		ctx, cancel := opCtx()
		res, err := lim.Allow(ctx)
		cancel()
		r.rec.add(event{W: "rate", Worker: w, Op: "allow", Key: "rate:faults", CallSeq: cs, Call: ct, Out: classify(err), Flag: res.Allowed, ServerAt: res.At, Err: errString(err)})
		pause(r.ctx, rnd, time.Millisecond, 8*time.Millisecond)
	}
	return nil
}

// ---- counter limits ----

const (
	counterLimit = 10
	counterFloor = 0
	// counterKeyOps is how many operations go to one key before the workers move to the next, so that
	// each key's history stays small enough for the linearizability check.
	counterKeyOps = 250
)

// counterLoad: workers increment (IncrementUpTo the limit) and decrement (DecrementDownTo the floor)
// a few keys by 1-3 and read them, moving to a new key every counterKeyOps operations.
type counterLoad struct {
	ops  atomic.Int64
	keys sync.Map
}

func (l *counterLoad) worker(r *run, w int, c rueidis.Client) error {
	st, err := counter.New(c, counter.WithLogger(discard))
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.Close(ctx)
	}()
	rnd := workerRand(r.seed, "counter", w)
	for r.ctx.Err() == nil {
		key := fmt.Sprintf("counter:%d", l.ops.Add(1)/counterKeyOps)
		l.keys.Store(key, true)
		delta := 1 + rnd.Int64N(3)
		e := event{W: "counter", Worker: w, Key: key, Token: delta}
		e.CallSeq, e.Call = r.rec.now()
		ctx, cancel := opCtx()
		switch k := rnd.IntN(20); {
		case k < 9:
			e.Op = "incr"
			res, err := st.IncrementUpTo(ctx, key, delta, counterLimit, 0)
			e.Out, e.Flag, e.Val, e.Err = classify(err), res.Allowed, res.Value, errString(err)
		case k < 17:
			e.Op = "decr"
			res, err := st.DecrementDownTo(ctx, key, delta, counterFloor)
			e.Out, e.Flag, e.Val, e.Err = classify(err), res.Allowed, res.Value, errString(err)
		default:
			e.Op, e.Token = "get", 0
			v, err := st.Get(ctx, key)
			e.Out, e.Val, e.Err = classify(err), v, errString(err)
		}
		cancel()
		r.rec.add(e)
		pause(r.ctx, rnd, 0, 4*time.Millisecond)
	}
	return nil
}

func (l *counterLoad) keyList() []string {
	var ks []string
	l.keys.Range(func(k, _ any) bool { ks = append(ks, k.(string)); return true })
	return ks
}
