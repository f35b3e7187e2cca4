package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/testkit"
)

// Settings of the fair section.
const (
	fairClients     = 8                      // clients shared by the FIFO check's waiters
	fairLoadCallers = 8                      // background lock-cycle callers of the FIFO check
	fairHold        = time.Millisecond       // how long each granted waiter holds the lease
	fairSlice       = 200 * time.Millisecond // the killed-waiter check's wait slice
	fairChildTTL    = 2 * time.Second        // the killed waiter's lease TTL: how long its lease lasts if never taken back
	fairPoll        = time.Millisecond       // interval of the LLEN, PTTL and EXISTS polls
	fairTimeout     = 30 * time.Second       // bound of one round or one repetition
)

// fairWaiterArg makes the runner's binary a killed-waiter child of the fair section instead of a
// run: "-fair-waiter=<addr>,<name>,<slice>" (slice as a Go duration). It is not a flag of the flag
// set (not a user setting, not in -help); main and the tests' TestMain look for it as the only
// argument. The child connects to addr (with $COORDKIT_REDIS_URL set, to that URL's server, with its
// credentials and TLS), queues on the fair lock name with lock.FairLocker.Acquire, that wait slice and
// the TTL fairChildTTL, and blocks until it is killed or its standard input closes (the parent ended).
const fairWaiterArg = "-fair-waiter="

// fairWaiterSpec returns the child's spec when args make this process a fair-waiter child.
func fairWaiterSpec(args []string) (string, bool) {
	if len(args) != 1 {
		return "", false
	}
	spec, ok := strings.CutPrefix(args[0], fairWaiterArg)
	if !ok {
		return "", false
	}
	return spec, true
}

// runFairWaiter is the child's whole life; it prints its errors to stderr and returns the process's
// exit code.
func runFairWaiter(spec string, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "peers: fair waiter:", err)
		return 1
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fail(fmt.Errorf("spec %q: want <addr>,<name>,<slice>", spec))
	}
	slice, err := time.ParseDuration(parts[2])
	if err != nil {
		return fail(err)
	}
	opt := rueidis.ClientOption{InitAddress: []string{parts[0]}}
	if u := os.Getenv(testkit.EnvRedisURL); u != "" {
		if opt, err = rueidis.ParseURL(u); err != nil {
			return fail(err)
		}
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	f, err := lock.NewFair(c, lock.WithWaitSlice(slice))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // the parent closes our standard input when it no longer needs us (or dies)
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	l, err := f.Acquire(ctx, parts[1], fairChildTTL)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return fail(err)
	}
	<-ctx.Done() // granted before being killed: hold until the parent is done
	_, _ = l.Release(context.Background())
	return 0
}

// errFairViolation reports order or token violations of the fair lock: a correctness failure.
var errFairViolation = errors.New("fair lock order or fencing violated")

// fairSection checks the fair lock's FIFO order and fencing tokens under load, and measures the delay
// a killed waiter adds.
func (r *runner) fairSection(ctx context.Context, srv contenders.Server) (*peers.Fair, error) {
	f := &peers.Fair{}
	start := time.Now()
	var err error
	if f.FIFO, err = r.fairFIFO(ctx, srv); err != nil {
		return nil, fmt.Errorf("FIFO: %w", err)
	}
	if f.Killed, err = r.fairKilled(ctx, srv); err != nil {
		return nil, fmt.Errorf("killed waiter: %w", err)
	}
	f.Seconds = time.Since(start).Seconds()
	return f, peers.WriteFair(r.out, f)
}

// fairVerdict returns an error wrapping errFairViolation when f counts order or token violations.
func fairVerdict(f *peers.Fair) error {
	if f == nil || f.Violations() == 0 {
		return nil
	}
	return fmt.Errorf("fair: %w: %d order and %d token violations", errFairViolation, f.FIFO.OrderViolations, f.FIFO.TokenViolations)
}

// grant is one waiter's turn: its queue index, fencing token, when its Acquire returned and when it
// called Release.
type grant struct {
	index    int
	token    int64
	acquired time.Time
	released time.Time
}

// fairFIFO runs the FIFO check's rounds with the background load running throughout.
func (r *runner) fairFIFO(ctx context.Context, srv contenders.Server) (peers.FairFIFO, error) {
	res := peers.FairFIFO{Rounds: r.cfg.rounds, Waiters: r.cfg.fairWaiters, Clients: fairClients, LoadCallers: fairLoadCallers}
	clients := make([]rueidis.Client, fairClients+1) // the waiters' and the holder's (the last)
	for i := range clients {
		c, err := rueidis.NewClient(cacheFree(srv))
		if err != nil {
			return res, err
		}
		defer c.Close()
		clients[i] = c
	}
	holder, err := lock.NewFair(clients[fairClients])
	if err != nil {
		return res, err
	}
	stopLoad, err := r.lockLoad(ctx, srv, fairLoadCallers)
	if err != nil {
		return res, err
	}
	var handoffs []time.Duration
	for round := range r.cfg.rounds {
		grants, first, released, err := r.fairRound(ctx, holder, clients[:fairClients])
		if err != nil {
			_, _ = stopLoad()
			return res, fmt.Errorf("round %d: %w", round+1, err)
		}
		order := make([]int, len(grants))
		tokens := make([]int64, len(grants))
		for j, g := range grants {
			order[j], tokens[j] = g.index, g.token
			handoffs = append(handoffs, g.acquired.Sub(released))
			released = g.released
		}
		o, t := peers.CountFIFO(order, tokens, first, r.cfg.fairWaiters)
		res.Grants += len(grants)
		res.OrderViolations += o
		res.TokenViolations += t
		logf(r.out, "fair: FIFO round %d/%d done", round+1, r.cfg.rounds)
	}
	if res.LoadCycles, err = stopLoad(); err != nil {
		return res, fmt.Errorf("background load: %w", err)
	}
	res.P50Ms, res.P99Ms = msOf(peers.Quantile(handoffs, 0.50)), msOf(peers.Quantile(handoffs, 0.99))
	return res, nil
}

// fairRound runs one round of the FIFO check on a fresh name: the holder takes it, the waiters queue
// in index order (waiter i starts once the queue holds i entries), the holder releases, and every
// waiter records its grant, holds fairHold and releases. It returns the grants in grant order, the
// holder's fencing token and the time of the holder's release call.
func (r *runner) fairRound(ctx context.Context, holder *lock.FairLocker, clients []rueidis.Client) ([]grant, int64, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, fairTimeout)
	defer cancel()
	name := r.keyer("fair")(0)
	queue := "{" + name + "}:queue"
	held, err := holder.TryAcquire(ctx, name, contenders.TTL)
	if err != nil {
		return nil, 0, time.Time{}, fmt.Errorf("holder: %w", err)
	}
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	errs := make(chan error, r.cfg.fairWaiters)
	fail := func(err error) ([]grant, int64, time.Time, error) {
		cancel()
		wg.Wait()
		_, _ = held.Release(context.WithoutCancel(ctx))
		close(errs)
		return nil, 0, time.Time{}, errors.Join(append([]error{err}, collect(errs)...)...)
	}
	for i := range r.cfg.fairWaiters {
		f, err := lock.NewFair(clients[i%len(clients)])
		if err != nil {
			return fail(err)
		}
		wg.Go(func() {
			l, err := f.Acquire(ctx, name, contenders.TTL)
			if err != nil {
				errs <- fmt.Errorf("waiter %d: %w", i, err)
				return
			}
			mu.Lock()
			grants = append(grants, grant{index: i, token: l.FencingToken(), acquired: time.Now()})
			j := len(grants) - 1
			mu.Unlock()
			time.Sleep(fairHold) // the waiter's critical section
			mu.Lock()
			grants[j].released = time.Now()
			mu.Unlock()
			if err := release(ctx, l); err != nil {
				errs <- fmt.Errorf("waiter %d release: %w", i, err)
			}
		})
		if err := r.pollLen(ctx, queue, int64(i+1), errs); err != nil {
			return fail(fmt.Errorf("queueing waiter %d: %w", i, err))
		}
	}
	start := time.Now()
	if err := release(ctx, held); err != nil {
		return fail(fmt.Errorf("holder's release: %w", err))
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return nil, 0, time.Time{}, err
	}
	return grants, held.FencingToken(), start, nil
}

// collect drains a closed error channel.
func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// lockLoad runs Coordkit's lock cycles (contenders.NewCoordkitLock, fresh keys) from callers
// goroutines until the returned stop is called; stop returns the cycles done and the first error.
func (r *runner) lockLoad(ctx context.Context, srv contenders.Server, callers int) (stop func() (int64, error), err error) {
	l, err := contenders.NewCoordkitLock(srv)
	if err != nil {
		return nil, err
	}
	key := r.keyer("fl")
	var halt atomic.Bool
	var seq, cycles atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for !halt.Load() {
				if err := l.TryAcquireRelease(ctx, key(seq.Add(1))); err != nil {
					once.Do(func() { first = err })
					return
				}
				cycles.Add(1)
			}
		})
	}
	return func() (int64, error) {
		halt.Store(true)
		wg.Wait()
		l.Close()
		return cycles.Load(), first
	}, nil
}

// pollLen polls LLEN key every fairPoll until it is want; it stops early when errs (if not nil)
// holds an error (a waiter failed: the queue would never reach want).
func (r *runner) pollLen(ctx context.Context, key string, want int64, errs chan error) error {
	return r.poll(ctx, func() (bool, error) {
		if len(errs) > 0 {
			return false, errors.New("a waiter failed")
		}
		m, err := r.nodes[0].Do(ctx, "LLEN", key)
		if err != nil {
			return false, err
		}
		n, err := m.AsInt64()
		return n == want, err
	}, fmt.Sprintf("LLEN %s = %d", key, want))
}

// poll calls cond every fairPoll until it is true, fails, or ctx ends.
func (r *runner) poll(ctx context.Context, cond func() (bool, error), what string) error {
	t := time.NewTicker(fairPoll)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// fairKilled runs the killed-waiter check -rounds times for each case: killed within its slice and
// killed with the release after its slice.
func (r *runner) fairKilled(ctx context.Context, srv contenders.Server) (peers.FairKilled, error) {
	res := peers.FairKilled{SliceMs: msOf(fairSlice), DeadTTLMs: msOf(fairChildTTL)}
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	hc, err := rueidis.NewClient(cacheFree(srv))
	if err != nil {
		return res, err
	}
	defer hc.Close()
	wc, err := rueidis.NewClient(cacheFree(srv))
	if err != nil {
		return res, err
	}
	defer wc.Close()
	holder, err := lock.NewFair(hc, lock.WithWaitSlice(fairSlice))
	if err != nil {
		return res, err
	}
	live, err := lock.NewFair(wc, lock.WithWaitSlice(fairSlice))
	if err != nil {
		return res, err
	}
	for _, afterSlice := range []bool{false, true} {
		var delays []time.Duration
		var lefts []float64
		dead, heldToTTL := 0, 0
		for rep := range r.cfg.rounds {
			// Within its slice, the kills spread over the child's renewal period (half a slice):
			// the child dies with between a half and a whole slice of its waiter key's life left.
			var killLeft time.Duration
			if !afterSlice {
				killLeft = fairSlice - time.Duration(2*rep+1)*fairSlice/time.Duration(4*r.cfg.rounds)
			}
			d, toDead, left, err := r.killedOnce(ctx, exe, holder, live, killLeft)
			if err != nil {
				return res, fmt.Errorf("repetition %d (after slice: %v): %w", rep+1, afterSlice, err)
			}
			delays = append(delays, d)
			lefts = append(lefts, msOf(left))
			if d >= fairChildTTL { // the lease granted at the release expired: it was never taken back
				heldToTTL++
			}
			if toDead {
				dead++
			}
		}
		s := peers.DelaySpreadOf(delays)
		s.DeadGrants, s.HeldToTTL, s.SliceLeftMs = dead, heldToTTL, lefts
		if afterSlice {
			res.AfterSlice = s
		} else {
			res.InSlice = s
		}
		when := "within its slice"
		if afterSlice {
			when = "after its slice"
		}
		logf(r.out, "fair: killed waiter, released %s: %d repetitions done", when, r.cfg.rounds)
	}
	return res, nil
}

// killedOnce runs one killed-waiter repetition on a fresh name: the holder holds, a child process
// queues, the live waiter queues behind it; with killLeft > 0, once the child's waiter key has at most
// killLeft of its life left (a point of the child's renewal period), the child is killed (and reaped)
// and the holder releases at once; with killLeft 0 the child is killed at once and the holder
// releases once the child's waiter key expired. It returns the delay from the release
// call to the live waiter's Acquire returning, whether the release granted the lease to the dead
// child (the lease's owner read just after the release) and what was left of the child's slice then
// (its waiter key's PTTL read just before the release, 0 when gone).
func (r *runner) killedOnce(ctx context.Context, exe string, holder, live *lock.FairLocker, killLeft time.Duration) (delay time.Duration, toDead bool, left time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, fairTimeout)
	defer cancel()
	name := r.keyer("fk")(0)
	queue := "{" + name + "}:queue"
	held, err := holder.TryAcquire(ctx, name, contenders.TTL)
	if err != nil {
		return 0, false, 0, fmt.Errorf("holder: %w", err)
	}
	releasedHolder := false
	defer func() {
		if !releasedHolder {
			_, _ = held.Release(context.WithoutCancel(ctx))
		}
	}()

	cmd := exec.CommandContext(ctx, exe, fairWaiterArg+r.nodes[0].Addr+","+name+","+fairSlice.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, false, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, false, 0, fmt.Errorf("child: %w", err)
	}
	reaped := false
	defer func() {
		if !reaped {
			_ = stdin.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	if err := r.pollLen(ctx, queue, 1, nil); err != nil {
		return 0, false, 0, fmt.Errorf("child queueing: %w", err)
	}
	m, err := r.nodes[0].Do(ctx, "LINDEX", queue, "0")
	if err != nil {
		return 0, false, 0, err
	}
	entry, err := m.ToString()
	if err != nil {
		return 0, false, 0, err
	}
	childOwner, _, _ := strings.Cut(entry, ":") // entries are <owner>:<ttl ms>:<slice ms>
	childKey := "{" + name + "}:waiter:" + childOwner

	type acquired struct {
		l   *lock.Lease
		err error
		at  time.Time
	}
	done := make(chan acquired, 1)
	go func() {
		l, err := live.Acquire(ctx, name, contenders.TTL)
		done <- acquired{l, err, time.Now()}
	}()
	waitLive := func() acquired { cancel(); return <-done }
	if err := r.pollLen(ctx, queue, 2, nil); err != nil {
		a := waitLive()
		return 0, false, 0, errors.Join(fmt.Errorf("live waiter queueing: %w", err), a.err)
	}
	if killLeft > 0 {
		err := r.poll(ctx, func() (bool, error) {
			m, err := r.nodes[0].Do(ctx, "PTTL", childKey)
			if err != nil {
				return false, err
			}
			n, err := m.AsInt64()
			return n >= 0 && time.Duration(n)*time.Millisecond <= killLeft, err
		}, "the killed waiter's key to have at most "+killLeft.String()+" left")
		if err != nil {
			a := waitLive()
			return 0, false, 0, errors.Join(err, a.err)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait() // the child is dead (and its connections closed) once reaped
	_ = stdin.Close()
	reaped = true
	if killLeft == 0 {
		err := r.poll(ctx, func() (bool, error) {
			m, err := r.nodes[0].Do(ctx, "EXISTS", childKey)
			if err != nil {
				return false, err
			}
			n, err := m.AsInt64()
			return n == 0, err
		}, "the killed waiter's key to expire")
		if err != nil {
			a := waitLive()
			return 0, false, 0, errors.Join(err, a.err)
		}
	}
	// what is left of the child's slice (its waiter key's PTTL) as the release is sent: a grant
	// deletes the key
	pttl, err := r.nodes[0].Do(ctx, "PTTL", childKey)
	if err != nil {
		a := waitLive()
		return 0, false, 0, errors.Join(err, a.err)
	}
	leftMs, _ := pttl.AsInt64() // -2 once the key expired
	start := time.Now()
	releasedHolder = true
	if err := release(ctx, held); err != nil {
		a := waitLive()
		return 0, false, 0, errors.Join(fmt.Errorf("holder's release: %w", err), a.err)
	}
	owner, err := r.nodes[0].Do(ctx, "GET", "{"+name+"}:lease")
	if err != nil {
		a := waitLive()
		return 0, false, 0, errors.Join(err, a.err)
	}
	ownerToken, _ := owner.ToString() // nil when the live waiter already took it back
	a := <-done
	if a.err != nil {
		return 0, false, 0, fmt.Errorf("live waiter: %w", a.err)
	}
	if err := release(ctx, a.l); err != nil {
		return 0, false, 0, fmt.Errorf("live waiter's release: %w", err)
	}
	return a.at.Sub(start), ownerToken == childOwner, time.Duration(max(leftMs, 0)) * time.Millisecond, nil
}

// release releases l, which must have been held until then.
func release(ctx context.Context, l *lock.Lease) error {
	out, err := l.Release(ctx)
	if err == nil && out != lock.Released {
		err = fmt.Errorf("release: %v", out)
	}
	return err
}

// cacheFree returns srv's client option with client-side caching off.
func cacheFree(srv contenders.Server) rueidis.ClientOption {
	o := srv.Option
	o.DisableCache = true
	return o
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
