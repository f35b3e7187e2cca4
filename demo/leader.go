package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
	"github.com/coordkit/coordkit/testkit/fence"
)

// The leader-election step's timing: a short lease so the stalled leader is replaced in well under a
// second, and a stall three times as long as the lease.
const (
	electionLease     = 600 * time.Millisecond
	electionMargin    = 150 * time.Millisecond
	electionRetry     = 50 * time.Millisecond
	schedulerTick     = 50 * time.Millisecond
	leaderStall       = 1500 * time.Millisecond
	leaderReplicas    = 3
	leaderWrites      = 5           // writes the replacement leader makes before the step winds down
	schedulerElection = "scheduler" // its keys: {scheduler}:lease and {scheduler}:fence (lock.Keys)
)

// schedTerm is one term as the scheduler replicas saw it (times from this process's monotonic clock).
type schedTerm struct {
	replica  int
	token    int64
	elected  time.Time
	revoked  time.Time
	cause    error
	accepted int
	rejected int
}

// schedulers is the shared state of one run of the step.
type schedulers struct {
	record fence.Fence[string] // the protected resource: the scheduler's fenced job table

	mu    sync.Mutex
	terms []*schedTerm

	stalledOnce  atomic.Bool
	changes      atomic.Int64 // OnChange notifications
	stall        stallReport
	stallDone    chan struct{} // closed after the stalled leader's late write
	replacements chan struct{} // one value per write of a leader after the stalled one
}

type stallReport struct {
	replica     int
	token       int64
	began       time.Time
	ctxDoneAt   time.Time // when the stalled leader's term context was cancelled (seen after waking)
	recordToken int64     // the record's highest accepted token just before the late write
	lateOK      bool
}

// leaderStep: three scheduler replicas, each with its own client (through its own TCP proxy, so one
// replica's network can fail alone), elect a leader that writes to a fenced record with its fencing
// token. The first leader stalls: its network stops answering (as in a long GC pause or a frozen VM,
// when renewals stop too) while its elected callback sleeps past its lease without checking its
// context. The election fences it off at its local deadline, another replica takes over once the server
// lease expires and writes with a larger token, and the stale leader's late write is rejected.
func leaderStep(ctx context.Context, e *env) (stepResult, error) {
	if len(e.option.InitAddress) != 1 {
		return stepResult{}, errors.New("leader step: needs one standalone server address")
	}
	s := &schedulers{stallDone: make(chan struct{}), replacements: make(chan struct{}, 1024)}
	var (
		clients []rueidis.Client
		proxies []*testkit.Proxy
	)
	defer func() {
		closeAll(clients)
		for _, p := range proxies {
			_ = p.Close()
		}
	}()
	elections := make([]*leader.Election, leaderReplicas)
	for i := range elections {
		p, err := testkit.LaunchProxy(e.option.InitAddress[0])
		if err != nil {
			return stepResult{}, fmt.Errorf("proxy for replica %d: %w", i+1, err)
		}
		proxies = append(proxies, p)
		c, err := luakit.NewTrackedClient(p.ClientOption(), luakit.NewTracker()) // the election finds its tracker
		if err != nil {
			return stepResult{}, fmt.Errorf("client for replica %d: %w", i+1, err)
		}
		clients = append(clients, c)
		replica := i + 1
		elections[i], err = leader.New(c, schedulerElection,
			leader.WithKeyPrefix(e.prefix),
			leader.WithLeaseDuration(electionLease),
			leader.WithSafetyMargin(electionMargin),
			leader.WithRetryDelay(electionRetry),
			leader.WithCleanupTimeout(200*time.Millisecond),
			leader.WithLogger(slog.New(slog.DiscardHandler)), // the stall's failed renewals are expected
			leader.OnElected(func(ctx context.Context, term leader.Term) error {
				return s.elected(ctx, replica, term, p)
			}),
			leader.OnRevoked(s.revoked),
			leader.OnChange(func(leader.Change) { s.changes.Add(1) }),
		)
		if err != nil {
			return stepResult{}, err
		}
	}
	defer s.cleanup(ctx, clients[0], e.prefix)

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make([]error, leaderReplicas)
	var wg sync.WaitGroup
	for i, el := range elections {
		wg.Go(func() { errs[i] = el.Run(runCtx) })
	}
	// Wind down once the stale write was attempted and the replacement leader wrote a few times.
	deadline := time.NewTimer(8 * time.Second)
	defer deadline.Stop()
	timedOut := false
	select {
	case <-s.stallDone:
	case <-deadline.C:
		timedOut = true
	}
	for n := 0; n < leaderWrites && !timedOut; n++ {
		select {
		case <-s.replacements:
		case <-deadline.C:
			timedOut = true
		}
	}
	stop()
	wg.Wait()
	if timedOut {
		return stepResult{}, errors.New("leader step: no takeover and stale write within 8s")
	}
	var leftover int64 = -3
	leaseKey, _ := lock.Keys(schedulerElection)
	if n, err := clients[0].Do(ctx, clients[0].B().Pttl().Key(e.prefix+leaseKey).Build()).AsInt64(); err == nil {
		leftover = n
	}
	return s.report(errs, leftover), nil
}

// elected is every replica's OnElected callback. The first term stalls; later terms write every tick
// until revoked.
func (s *schedulers) elected(ctx context.Context, replica int, term leader.Term, p *testkit.Proxy) error {
	t := &schedTerm{replica: replica, token: term.FencingToken, elected: time.Now()}
	s.mu.Lock()
	s.terms = append(s.terms, t)
	s.mu.Unlock()
	write := func() bool {
		ok := s.record.TryWrite(term.FencingToken, fmt.Sprintf("run jobs (replica %d)", replica))
		s.mu.Lock()
		if ok {
			t.accepted++
		} else {
			t.rejected++
		}
		s.mu.Unlock()
		return ok
	}
	if s.stalledOnce.CompareAndSwap(false, true) {
		write()
		// The stall: the replica's network goes silent (renewals stop) and the callback sleeps without
		// looking at ctx, as a paused process would.
		began := time.Now()
		if err := p.DropReplies(); err != nil {
			return err
		}
		time.Sleep(leaderStall)
		doneAt := time.Now()
		if ctx.Err() == nil {
			doneAt = time.Time{}
		}
		_, recordToken := s.record.Value()
		lateOK := write() // the late write with the old token
		s.mu.Lock()
		s.stall = stallReport{replica: replica, token: term.FencingToken, began: began, ctxDoneAt: doneAt,
			recordToken: recordToken, lateOK: lateOK}
		s.mu.Unlock()
		close(s.stallDone)
		return p.Reset() // the network heals; returning ends the (already revoked) term
	}
	tick := time.NewTicker(schedulerTick)
	defer tick.Stop()
	for {
		if write() {
			select {
			case s.replacements <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (s *schedulers) revoked(term leader.Term) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.terms {
		if t.token == term.FencingToken && t.revoked.IsZero() {
			t.revoked, t.cause = now, term.Err()
		}
	}
}

// cleanup deletes the step's keys, also after a failure.
func (s *schedulers) cleanup(ctx context.Context, c rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	leaseKey, fenceKey := lock.Keys(schedulerElection)
	_ = c.Do(ctx, c.B().Del().Key(prefix+leaseKey, prefix+fenceKey).Build()).Error()
}

func (s *schedulers) report(runErrs []error, leftoverPTTL int64) stepResult {
	var res stepResult
	s.mu.Lock()
	terms := make([]schedTerm, len(s.terms))
	for i, t := range s.terms {
		terms[i] = *t
	}
	st := s.stall
	s.mu.Unlock()
	sort.Slice(terms, func(i, j int) bool { return terms[i].elected.Before(terms[j].elected) })

	var seq []string
	increasing, ordered, allRevoked := true, true, true
	for i, t := range terms {
		seq = append(seq, fmt.Sprintf("replica %d (token %d)", t.replica, t.token))
		if t.revoked.IsZero() {
			allRevoked = false
		}
		if i > 0 {
			increasing = increasing && t.token > terms[i-1].token
			ordered = ordered && !terms[i-1].revoked.IsZero() && terms[i-1].revoked.Before(t.elected)
		}
	}
	var stalled, next schedTerm
	for i, t := range terms {
		if t.token == st.token {
			stalled = t
			if i+1 < len(terms) {
				next = terms[i+1]
			}
		}
	}
	accepted, rejected := s.record.Counts()
	var normalRejected int
	for _, t := range terms {
		if t.token != st.token {
			normalRejected += t.rejected
		}
	}
	var runFailures []string
	for i, err := range runErrs {
		if err != nil {
			runFailures = append(runFailures, fmt.Sprintf("replica %d: %v", i+1, err))
		}
	}
	takeover := next.elected.Sub(st.began)
	fenced := stalled.revoked.Sub(stalled.elected)

	res.add("replicas", "%d (one client each through its own proxy; lease %v, retry %v, safety margin %v)",
		leaderReplicas, electionLease, electionRetry, electionMargin)
	res.add("leader changes", "%d terms: %s; %d change notifications", len(terms), strings.Join(seq, " -> "), s.changes.Load())
	res.add("stalled leader", "replica %d, token %d: network silent + callback asleep %v ignoring ctx", st.replica, st.token, leaderStall)
	res.add("self-fencing", "term revoked %s after election (cause: %v)", ms(fenced), stalled.cause)
	res.add("takeover", "replica %d with token %d, %s after the stall began", next.replica, next.token, ms(takeover))
	res.add("writes accepted", "%d", accepted)
	res.add("stale writes rejected", "%d (late write with token %d; record was at token %d)", rejected, st.token, st.recordToken)

	res.check("one leader at a time: each term revoked before the next began", ordered && allRevoked && len(terms) >= 2,
		"%d terms", len(terms))
	res.check("fencing tokens strictly increase across terms", increasing, "%s", strings.Join(seq, ", "))
	res.check("stalled leader fenced itself off at its local deadline", errors.Is(stalled.cause, leader.ErrExpired) &&
		!st.ctxDoneAt.IsZero() && fenced < electionLease, "cause %v after %s", stalled.cause, ms(fenced))
	res.check("a new leader took over within lease + retry + 1s", next.token > st.token &&
		takeover < electionLease+electionRetry+time.Second, "%s", ms(takeover))
	res.check("exactly the stale write rejected", rejected == 1 && !st.lateOK && st.recordToken > st.token,
		"rejected %d, late write accepted=%v", rejected, st.lateOK)
	res.check("every current leader's write accepted", normalRejected == 0 && accepted >= leaderWrites+1,
		"accepted %d, rejected from current leaders %d", accepted, normalRejected)
	res.check("every Run returned nil on shutdown", len(runFailures) == 0, "%s", strings.Join(runFailures, "; "))
	res.check("lease released on shutdown", leftoverPTTL == -2, "PTTL %d", leftoverPTTL)
	res.summary = fmt.Sprintf("%d terms, takeover %s after the stall, %d writes accepted, %d stale rejected",
		len(terms), ms(takeover), accepted, rejected)
	return res
}
