package leader_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// scenarios are the election scenarios of TestLeader and TestLeaderOnSentinel.
var scenarios = []matrix.Scenario[*env]{
	{Name: "exactly_one_leader", Run: testExactlyOne},
	{Name: "killed_leader_fails_over", Run: testKilledLeader},
	{Name: "paused_server_fails_over", Run: testPausedServer, StandaloneOnly: true},
	{Name: "readonly_is_retried", Run: func(t *testing.T, e *env) { testReadonlyRetried(t, testkit.Target(e.Name)) }, StandaloneOnly: true},
	{Name: "release_is_sent_again", Run: testReleaseSentAgain, StandaloneOnly: true},
	{Name: "noperm_is_terminal", Run: testNopermTerminal},
	{Name: "callback_failure_ends_run", Run: testCallbackFailure},
	{Name: "start_stop_releases", Run: testStartStop},
	{Name: "tracked_client_takes_over_on_release", Run: testTrackedClientTakeover},
	{Name: "explicit_keys_and_strict_slots", Run: testExplicitKeys},
}

// TestLeader runs the election scenarios on every target of the matrix (the standalone-only ones
// drive one server process: pause, a replica pair of its own, a proxy).
func TestLeader(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		matrix.RunScenarios(t, mt, startEnv(t, mt), scenarios, nil)
	})
}

// testExactlyOne: three candidates, each leader relinquishing after a random 100-300ms, for three
// seconds. At no sample are two callbacks active or two candidates' Current set; terms alternate with
// strictly increasing tokens, each revoked before the next began.
func testExactlyOne(t *testing.T, e *env) {
	name, leaseKey, fenceKey := election("one")
	rec := &recorder{}
	work := func(ctx context.Context, _ leader.Term) error {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(100+rand.IntN(200)) * time.Millisecond):
		}
		return nil
	}
	cs := make([]*candidate, 3)
	for i := range cs {
		cs[i] = newCandidate(t, e, i, name, rec, work)
	}
	var (
		samples, withLeader, overlaps atomic.Int64
		stopSampling                  = make(chan struct{})
		sampled                       = make(chan struct{})
	)
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			n := 0
			for _, c := range cs {
				if _, ok := c.el.Current(); ok {
					n++
				}
			}
			samples.Add(1)
			if n == 1 {
				withLeader.Add(1)
			}
			if n > 1 {
				overlaps.Add(1)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	for _, c := range cs {
		c.start()
	}
	time.Sleep(3 * time.Second)
	close(stopSampling)
	<-sampled
	for _, c := range cs {
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
	}

	terms := rec.snapshot()
	sort.Slice(terms, func(i, j int) bool { return terms[i].elected.Before(terms[j].elected) })
	t.Logf("%d terms, %d samples (%d with a leader)", len(terms), samples.Load(), withLeader.Load())
	require.False(t, rec.violated, "two elected callbacks were active at once (max %d)", rec.maxSeen)
	require.Zero(t, overlaps.Load(), "two candidates reported Current at once")
	require.Positive(t, withLeader.Load())
	require.GreaterOrEqual(t, len(terms), 3, "leaders relinquish, so leadership changes hands")
	for i, ev := range terms {
		require.False(t, ev.revoked.IsZero(), "term %d (token %d) was never revoked", i, ev.token)
		if i > 0 {
			require.Greater(t, ev.token, terms[i-1].token, "fencing tokens increase across terms")
			require.True(t, terms[i-1].revoked.Before(ev.elected), "term %d revoked before term %d began", i-1, i)
		}
	}
	for _, c := range cs {
		n := int64(0)
		for _, ev := range terms {
			if ev.candidate == c.id {
				n++
			}
		}
		require.Equal(t, n, c.metric(t, leader.MetricChanges, "elected"), "candidate %d elected metric", c.id)
		require.Equal(t, n, c.metric(t, leader.MetricChanges, "revoked"), "candidate %d revoked metric", c.id)
		require.Zero(t, c.metric(t, leader.MetricAcquireFailures, ""), "no transient failures")
	}
	e.requireReleased(t, leaseKey, fenceKey, terms[len(terms)-1].token)
}

// awaitNewTerm waits until a term with a token above old began, and returns it.
func awaitNewTerm(t *testing.T, rec *recorder, old int64, within time.Duration) event {
	t.Helper()
	var got event
	waitFor(t, within, "a new term", func() bool {
		for _, ev := range rec.snapshot() {
			if ev.token > old {
				got = ev
				return true
			}
		}
		return false
	})
	return got
}

func termOf(rec *recorder, token int64) event {
	for _, ev := range rec.snapshot() {
		if ev.token == token {
			return ev
		}
	}
	return event{}
}

// testKilledLeader: closing the leader's client ends its term at its next renewal; another candidate
// wins within LeaseDuration + RetryDelay + slack with a larger token, after the old term was revoked;
// the old candidate's Run ends with the closed client's error.
func testKilledLeader(t *testing.T, e *env) {
	name, leaseKey, fenceKey := election("kill")
	rec := &recorder{}
	cs := make([]*candidate, 3)
	for i := range cs {
		cs[i] = newCandidate(t, e, i, name, rec, nil)
		cs[i].start()
	}
	var li int
	var old leader.Term
	waitFor(t, 10*time.Second, "a first leader", func() bool {
		li, old = currentLeader(cs)
		return li >= 0
	})
	time.Sleep(leaseDuration) // at least one renewal
	// Kill the candidate that leads right now (leadership may have moved if a renewal was too slow).
	waitFor(t, 10*time.Second, "a current leader", func() bool {
		li, old = currentLeader(cs)
		return li >= 0
	})
	killedAt := time.Now()
	cs[li].client.Close()
	next := awaitNewTerm(t, rec, old.FencingToken, leaseDuration+retryDelay+slack)
	took := next.elected.Sub(killedAt)
	t.Logf("failover after closing the leader's client: %v (token %d -> %d)", took, old.FencingToken, next.token)
	require.Less(t, took, leaseDuration+retryDelay+slack)
	require.NotEqual(t, cs[li].id, next.candidate)
	prev := termOf(rec, old.FencingToken)
	require.False(t, prev.revoked.IsZero(), "the old term was revoked")
	require.True(t, prev.revoked.Before(next.elected), "old term revoked (%v) before the new began (%v)",
		prev.revoked.Sub(killedAt), next.elected.Sub(killedAt))
	require.Error(t, old.Context().Err(), "the old term's context is cancelled")

	select {
	case err := <-cs[li].done:
		require.Error(t, err)
		require.True(t, isClosing(err), "Run ends with the closed client's error: %v", err)
	case <-time.After(30 * time.Second):
		// Not a latency bound: Run waits for its renewal goroutine, and a command caught by a cluster
		// client's asynchronous Close can wait for rueidis' connection write timeout (10s) on a loaded
		// machine (seen once at 10s in a full run). The client is a luakit.GuardClose one: an
		// unguarded rueidis client could revive a connection dialled during Close, and Run then
		// campaigned on it for ever (seen once in a full run).
		buf := make([]byte, 1<<20)
		t.Fatalf("the killed candidate's Run did not return; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
	}
	for i, c := range cs {
		if i != li {
			require.NoError(t, c.stop(t))
		}
	}
	require.EqualValues(t, 1, cs[li].metric(t, leader.MetricChanges, "revoked"))
	e.requireReleased(t, leaseKey, fenceKey, next.token)
}

// testPausedServer: the server stops answering (SIGSTOP) past the lease; the leader fences itself off
// at its local deadline, and after the server resumes a new term (larger token) begins within
// LeaseDuration + RetryDelay + slack, after the old term was revoked.
func testPausedServer(t *testing.T, e *env) {
	name, leaseKey, fenceKey := election("pause")
	rec := &recorder{}
	cs := make([]*candidate, 3)
	for i := range cs {
		cs[i] = newCandidate(t, e, i, name, rec, nil)
		cs[i].start()
	}
	var old leader.Term
	waitFor(t, 10*time.Second, "a first leader", func() bool {
		li, term := currentLeader(cs)
		old = term
		return li >= 0
	})
	require.NoError(t, e.Srv.Pause())
	pausedAt := time.Now()
	time.Sleep(leaseDuration + 300*time.Millisecond)
	prev := termOf(rec, old.FencingToken)
	require.False(t, prev.revoked.IsZero(), "the leader revoked its term while the server was paused")
	require.ErrorIs(t, prev.cause, leader.ErrExpired, "self-fenced at the local deadline")
	require.Less(t, prev.revoked.Sub(pausedAt), leaseDuration, "revoked before the server lease could expire")
	require.NoError(t, e.Srv.Resume())
	resumedAt := time.Now()
	next := awaitNewTerm(t, rec, old.FencingToken, leaseDuration+retryDelay+slack)
	t.Logf("new term %v after resume (token %d -> %d)", next.elected.Sub(resumedAt), old.FencingToken, next.token)
	require.True(t, prev.revoked.Before(next.elected))
	for _, c := range cs {
		require.NoError(t, c.stop(t))
	}
	e.requireReleased(t, leaseKey, fenceKey, next.token)
}

// testReadonlyRetried: a candidate whose client talks to a replica gets READONLY; Run keeps retrying
// (acquire_failures grows) and wins once the replica is promoted (a simulated failover).
func testReadonlyRetried(t *testing.T, target testkit.Target) {
	rep := testkit.StartReplicated(t, target)
	tr := luakit.NewTracker()
	c, err := luakit.NewTrackedClient(rep.Replica.ClientOption(), tr)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	name, leaseKey, _ := election("readonly")
	rec := &recorder{}
	cand := newCandidateWith(t, c, tr, 0, name, rec, nil)
	cand.start()
	waitFor(t, 10*time.Second, "READONLY failures", func() bool {
		return cand.metric(t, leader.MetricAcquireFailures, "") >= 3
	})
	_, ok := cand.el.Current()
	require.False(t, ok, "no term on a read-only replica")
	stats, err := rep.Replica.Do(ctx(t), "INFO", "errorstats")
	require.NoError(t, err)
	info, _ := stats.ToString()
	require.Contains(t, info, "errorstat_READONLY", "the replica answered READONLY")
	require.NoError(t, rep.Failover(ctx(t), testkit.FailoverOptions{OldPrimary: testkit.KeepOldPrimary}))
	waitFor(t, leaseDuration+retryDelay+slack, "a term after the promotion", func() bool {
		_, ok := cand.el.Current()
		return ok
	})
	term, _ := cand.el.Current()
	require.Positive(t, term.FencingToken)
	require.NoError(t, cand.stop(t))
	require.EqualValues(t, 1, cand.metric(t, leader.MetricChanges, "elected"))
	n, err := c.Do(ctx(t), c.B().Pttl().Key(leaseKey).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, -2, n, "lease released on the promoted server")
}

// testNopermTerminal: a user without scripting permission gets NOPERM; Run ends with that terminal
// error, writes nothing and counts no transient failure.
func testNopermTerminal(t *testing.T, e *env) {
	const user = "ck-leader-limited"
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "-@scripting")
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, n := range e.Nodes {
			_, _ = n.Do(context.Background(), "ACL", "DELUSER", user)
		}
	})
	c, tr := e.trackedClient(t, func(o *rueidis.ClientOption) { o.Username, o.Password = user, "pw" })
	name, leaseKey, fenceKey := election("noperm")
	rec := &recorder{}
	cand := newCandidateWith(t, c, tr, 0, name, rec, nil)
	rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cand.el.Run(rctx)
	require.Error(t, err)
	require.NoError(t, rctx.Err(), "Run ended on its own")
	require.True(t, luakit.IsTerminal(err), "terminal: %v", err)
	require.ErrorIs(t, err, leader.ErrNoPermission, "typed permission error")
	require.Zero(t, cand.metric(t, leader.MetricAcquireFailures, ""))
	require.Zero(t, cand.metric(t, leader.MetricChanges, ""))
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "no lease written")
	require.EqualValues(t, -2, e.PTTL(t, fenceKey), "no counter written")
}

// testCallbackFailure: an elected callback that returns an error or panics ends Run with that error,
// after OnRevoked ran once and the lease was released.
func testCallbackFailure(t *testing.T, e *env) {
	boom := errors.New("scheduler failed")
	tests := []struct {
		name string
		work func(context.Context, leader.Term) error
		want error
	}{
		{"error", func(context.Context, leader.Term) error { return boom }, boom},
		{"panic", func(context.Context, leader.Term) error { panic("scheduler bug") }, leader.ErrCallbackPanic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, leaseKey, fenceKey := election("callback-" + tt.name)
			rec := &recorder{}
			cand := newCandidate(t, e, 0, name, rec, tt.work)
			rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := cand.el.Run(rctx)
			require.ErrorIs(t, err, tt.want)
			require.NoError(t, rctx.Err(), "Run ended on its own")
			terms := rec.snapshot()
			require.Len(t, terms, 1)
			require.False(t, terms[0].revoked.IsZero(), "OnRevoked ran")
			require.ErrorIs(t, terms[0].cause, leader.ErrReleased)
			_, ok := cand.el.Current()
			require.False(t, ok)
			require.EqualValues(t, 1, cand.metric(t, leader.MetricChanges, "revoked"))
			e.requireReleased(t, leaseKey, fenceKey, terms[0].token)
		})
	}
}

// testStartStop: Start campaigns in the background; Stop revokes the term (its context ends with Run's
// cause), waits for the callbacks, releases the lease and returns nil.
func testStartStop(t *testing.T, e *env) {
	name, leaseKey, fenceKey := election("start-stop")
	rec := &recorder{}
	cand := newCandidate(t, e, 0, name, rec, nil)
	require.NoError(t, cand.el.Start(context.Background()))
	require.ErrorIs(t, cand.el.Start(context.Background()), leader.ErrRunning)
	var term leader.Term
	waitFor(t, 10*time.Second, "a term", func() bool {
		var ok bool
		term, ok = cand.el.Current()
		return ok
	})
	require.Positive(t, e.PTTL(t, leaseKey), "the lease is held with an expiry")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cand.el.Stop(sctx))
	require.ErrorIs(t, term.Err(), context.Canceled, "the term ended with Run's context")
	select {
	case <-cand.el.Stopped():
		t.Fatal("Stopped must be reset after Stop returned Run's result")
	default:
	}
	require.EqualValues(t, 1, cand.metric(t, leader.MetricChanges, "elected"))
	require.EqualValues(t, 1, cand.metric(t, leader.MetricChanges, "revoked"))
	e.requireReleased(t, leaseKey, fenceKey, term.FencingToken)
}

// testReleaseSentAgain: when Run stops, the server cannot be reached for a moment (the proxy refuses
// connections, so the term's release fails at once); the release is sent again within the cleanup
// timeout, and the lease is gone when Run returns instead of expiring after the lease duration.
func testReleaseSentAgain(t *testing.T, e *env) {
	name, leaseKey, _ := election("release-again")
	proxy := testkit.NewProxy(t, e.Srv.Addr)
	tr := luakit.NewTracker()
	c, err := luakit.NewTrackedClient(proxy.ClientOption(), tr)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cand := newCandidateWith(t, c, tr, 0, name, &recorder{}, nil)
	cand.start()
	waitFor(t, 10*time.Second, "a term", func() bool { _, ok := cand.el.Current(); return ok })

	require.NoError(t, proxy.Refuse())
	accepted := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // well inside the 1s cleanup timeout and the 1s lease
		accepted <- proxy.Accept()
	}()
	require.NoError(t, cand.stop(t))
	require.NoError(t, <-accepted)
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "the lease was released before Run returned")
}

// testTrackedClientTakeover: candidates on clients from luakit.NewTrackedClient, without
// leader.WithTracker, with a 30 s lease. The second candidate campaigns (its acquire script ran, found
// the lease held) while the first one leads; when the leader stops (and releases), the waiter becomes
// leader within 2 s, long before the old lease's TTL could have passed: only the lease key's
// invalidation can wake it that early.
func testTrackedClientTakeover(t *testing.T, e *env) {
	const long = 30 * time.Second
	name, leaseKey, fenceKey := election("tracked-takeover")
	rec := &recorder{}
	c0, _ := e.trackedClient(t)
	first := newCandidateWith(t, c0, nil, 0, name, rec, nil, leader.WithLeaseDuration(long))
	first.start()
	var old leader.Term
	waitFor(t, 10*time.Second, "the first leader", func() bool {
		var ok bool
		old, ok = first.el.Current()
		return ok
	})

	pttlReads := func() int64 { return e.CommandStats(t)["pttl"] }
	before := pttlReads()
	c1, _ := e.trackedClient(t)
	second := newCandidateWith(t, c1, nil, 1, name, rec, nil, leader.WithLeaseDuration(long))
	second.start()
	// The acquire script reads the lease's PTTL (commandstats count commands run by scripts): once it
	// grew, the second candidate has found the lease held and waits.
	waitFor(t, 5*time.Second, "the second candidate's first attempt", func() bool { return pttlReads() > before })
	_, ok := second.el.Current()
	require.False(t, ok, "the second candidate waits while the first leads")

	stopped := time.Now()
	require.NoError(t, first.stop(t))
	next := awaitNewTerm(t, rec, old.FencingToken, 5*time.Second)
	took := next.elected.Sub(stopped)
	t.Logf("takeover %v after the leader stopped (lease %v)", took, long)
	require.Equal(t, 1, next.candidate)
	require.Less(t, took, 2*time.Second, "woken by the release, not by the lease's TTL")
	require.NoError(t, second.stop(t))
	e.requireReleased(t, leaseKey, fenceKey, next.token)
}

// testExplicitKeys: an election on an existing layout (WithKeys) leads on exactly those keys, not on
// the ones its name would derive; a pair in two slots fails in New, before any I/O, on Cluster and,
// with WithStrictSlots, on standalone too, while a standalone election without it accepts the pair.
func testExplicitKeys(t *testing.T, e *env) {
	name, derivedLease, _ := election("explicit")
	leaseKey, fenceKey := "{ck:leader:explicit}:leader", "{ck:leader:explicit}.fence"
	rec := &recorder{}
	cs := make([]*candidate, 2)
	for i := range cs {
		cs[i] = newCandidate(t, e, i, name, rec, nil, leader.WithKeys(leaseKey, fenceKey), leader.WithStrictSlots(true))
		require.Equal(t, leaseKey, cs[i].el.LeaseKey())
		require.Equal(t, fenceKey, cs[i].el.FenceKey())
		cs[i].start()
	}
	var term leader.Term
	waitFor(t, 10*time.Second, "a leader", func() bool {
		var li int
		li, term = currentLeader(cs)
		return li >= 0
	})
	require.Positive(t, e.PTTL(t, leaseKey), "the lease is held at the given key")
	require.EqualValues(t, -2, e.PTTL(t, derivedLease), "nothing at the key the name would derive")
	for _, c := range cs {
		require.NoError(t, c.stop(t))
	}
	e.requireReleased(t, leaseKey, fenceKey, term.FencingToken)

	c, _ := e.trackedClient(t)
	before := e.CommandStats(t)
	split := leader.WithKeys("ck:leader:explicit:a", "ck:leader:explicit:b")
	require.NotEqual(t, luakit.Slot("ck:leader:explicit:a"), luakit.Slot("ck:leader:explicit:b"))
	_, err := leader.New(c, name, split, leader.WithStrictSlots(true))
	require.ErrorIs(t, err, luakit.ErrCrossSlot)
	require.ErrorIs(t, err, leader.ErrInvalidConfig)
	_, err = leader.New(c, name, split)
	if e.IsCluster() {
		require.ErrorIs(t, err, luakit.ErrCrossSlot, "a Cluster client checks the slots without the option")
	} else {
		require.NoError(t, err, "a standalone election accepts two slots without WithStrictSlots")
	}
	d := e.CommandsSince(t, before)
	for _, cmd := range []string{"eval", "evalsha", "set", "incr", "pttl"} {
		require.Zero(t, d[cmd], "New sent %s", cmd)
	}
}
