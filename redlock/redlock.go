package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Group is a Redlock quorum over independent Redis or Valkey deployments, one rueidis client each.
//
// A Group holds no goroutine and no connection of its own: it never closes the clients, and each
// operation starts one goroutine per node that ends on its own, at the latest when the node's client
// gives up on the command (the operation itself returns at the node timeout). Its only state is what
// the restart quarantine learns: each node's last run_id and when that process started, and the
// longest TTL requested. It is safe for concurrent use by multiple goroutines. The zero value is not
// usable; use [NewGroup].
type Group struct {
	clients []rueidis.Client
	quorum  int
	cfg     config
	own     ownership.Config // shared by every Lease of the group
	q       *quarantine      // what the group knows of each node's server process
}

// NewGroup returns a Group over clients, in the given order (a node's index in errors is its position
// here). It does no I/O.
//
// clients must hold an odd number, at least 3, of distinct clients, each connected to a different,
// independent deployment (a standalone server, or a Sentinel-managed primary): the algorithm's safety
// assumes the nodes fail independently. Cluster clients are rejected ([ErrClusterClient]); so are nil
// clients ([ErrNilClient]), an even or too small count ([ErrNodeCount]) and the same client value twice
// ([ErrDuplicateClient]). The Group never closes the clients. Invalid options make NewGroup fail too.
func NewGroup(clients []rueidis.Client, opts ...Option) (*Group, error) {
	if len(clients) < 3 || len(clients)%2 == 0 {
		return nil, fmt.Errorf("%w (got %d)", ErrNodeCount, len(clients))
	}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("redlock: %w (client %d)", ErrNilClient, i)
		}
		if c.Mode() == rueidis.ClientModeCluster {
			return nil, fmt.Errorf("%w (client %d)", ErrClusterClient, i)
		}
		if reflect.TypeOf(c).Comparable() {
			for j := range i {
				if reflect.TypeOf(clients[j]) == reflect.TypeOf(c) && clients[j] == c {
					return nil, fmt.Errorf("%w (clients %d and %d)", ErrDuplicateClient, j, i)
				}
			}
		}
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.ack.Enabled() && cfg.ack.Timeout >= cfg.nodeTimeout {
		return nil, luakit.InvalidConfig("redlock", "replica acknowledgement timeout %v is not below the node timeout %v", cfg.ack.Timeout, cfg.nodeTimeout)
	}
	g := &Group{
		clients: append([]rueidis.Client(nil), clients...),
		quorum:  len(clients)/2 + 1,
		cfg:     cfg,
		q:       &quarantine{nodes: make([]nodeRun, len(clients))},
	}
	g.own = ownership.Config{
		Name:           "redlock",
		Margin:         g.drift,
		CheckTTL:       g.extendTTL,
		RenewFraction:  cfg.renewFraction,
		RetryDelay:     cfg.retryDelay,
		CleanupTimeout: cfg.cleanupTimeout(),
		Logger:         cfg.logger,
		Hooks:          cfg.hooks,
		Instance:       cfg.instance,
	}
	return g, nil
}

// Nodes returns the number of nodes (clients) in the group.
func (g *Group) Nodes() int { return len(g.clients) }

// Quorum returns the number of nodes that must confirm a step: Nodes()/2 + 1.
func (g *Group) Quorum() int { return g.quorum }

// FencedQuorum returns the number of nodes that must hold the lock and confirm the new fencing token
// for an acquisition in fenced mode ([WithFencing]) to succeed: Quorum()+1 (4 of 5 nodes; all 3 of
// 3). Any two such sets share at least three nodes, so a token written to one survives on the next
// holder's set when up to two nodes lose their data in between (see the package documentation,
// "Fenced mode"). Without fencing it is not used.
func (g *Group) FencedQuorum() int { return g.quorum + 1 }

// drift returns the drift allowance of a TTL: TTL × drift factor + [DriftConstant].
func (g *Group) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*g.cfg.driftFactor) + DriftConstant
}

// timing returns the TTL truncated to whole milliseconds (what the nodes are sent) and the drift
// allowance, or ErrInvalidTTL.
func (g *Group) timing(ttl time.Duration) (time.Duration, time.Duration, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, 0, fmt.Errorf("redlock: %w: must be at least 1ms (got %v)", ErrInvalidTTL, ttl)
	}
	t := time.Duration(ms) * time.Millisecond
	drift := g.drift(t)
	if t <= drift {
		return 0, 0, fmt.Errorf("redlock: %w: must exceed the drift allowance (got %v, drift allowance %v)", ErrInvalidTTL, ttl, drift)
	}
	return t, drift, nil
}

// extendTTL is a Lease's ExtendTTL rule (ownership.Config.CheckTTL): whole milliseconds, more than the
// drift allowance.
func (g *Group) extendTTL(ttl time.Duration) (time.Duration, error) {
	t, _, err := g.timing(ttl)
	return t, err
}

// TryAcquire makes one Redlock attempt on key with the given TTL (truncated to whole milliseconds) and
// returns the lease, or an error wrapping [ErrNotAcquired]. The attempt, its validity rule, the
// quarantine and the fenced mode's second step are the package documentation's (Model, Fenced mode,
// Restart quarantine): one round trip per node in parallel (two in fenced mode). A failed attempt is
// cleaned up on every node (owner-checked, queued behind the attempt on each node's connection,
// bounded by the cleanup timeout even when ctx is cancelled) before TryAcquire returns.
//
// Errors: one wrapping a [*QuorumError] (Op "acquire", or "fence") when too few nodes confirmed, with
// each failing node's error ([ErrHeld], [ErrQuarantined], [ErrUncertain], [*CounterError], server
// errors); one wrapping [ErrNotAcquired] and [ErrLateReply] when the majority came too late;
// [ErrInvalidTTL], [ErrSameKey] or luakit.ErrEmptyKey before any I/O; ctx's error when ctx is already
// done. It blocks for at most about two node timeouts (three in fenced mode).
func (g *Group) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := g.own.Begin(ctx, "TRY ACQUIRE")
	if err != nil {
		return nil, err
	}
	v, err := g.tryAcquireOp(ctx, key, ttl)
	endAcquire(ctx, &sc, err)
	return v, err
}

// tryAcquireOp is [Group.TryAcquire], run inside its hook scope.
func (g *Group) tryAcquireOp(ctx context.Context, key string, ttl time.Duration) (_ *Lease, err error) {
	return g.tryAcquire(ctx, key, ttl)
}

func (g *Group) tryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	if err := luakit.ValidateKey("lock key", key); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	ttl, drift, err := g.timing(ttl)
	if err != nil {
		return nil, err
	}
	pkey := g.cfg.keys.Key(key)
	var pfence string
	if g.cfg.fenced {
		pfence = g.cfg.keys.Key(g.cfg.fenceKey)
		if pfence == pkey {
			return nil, ErrSameKey
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: acquire: %w", err)
	}
	token := luakit.OwnerToken()
	keys := []string{pkey}
	if g.cfg.fenced {
		keys = append(keys, pfence)
	}
	probe := g.cfg.quarantine
	args := []string{token, luakit.FormatInt64(ttl.Milliseconds()), "0"}
	if probe {
		args[2] = "1"
	}
	g.q.learn(ttl)
	start := time.Now()
	res, settled := g.fanout(ctx, nil, nil, func(ctx context.Context, i int) rueidis.RedisResult {
		return g.exec(ctx, acquireScript, g.clients[i], keys, args, true)
	})
	prior := inflight(nil).with(settled) // the goroutines of nodes that timed out may still be running
	at := time.Now()
	period := g.q.period(g.cfg.longestTTL)
	granted := make([]int, 0, len(g.clients)) // every node that holds this attempt's token
	counted := 0                              // granted and not in quarantine
	mayHold := make([]bool, len(g.clients))   // granted, or its outcome is unknown
	refused := make([]NodeError, 0, len(g.clients))
	var quarantined []NodeError
	var fence int64
	for i, r := range res {
		rep, err := decodeAcquire(r.msg, r.err, g.cfg.fenced, probe)
		if err != nil {
			mayHold[i] = mayHaveRun(r.err, err)
			refused = append(refused, g.nodeError(i, err))
			continue
		}
		if !rep.granted {
			refused = append(refused, g.nodeError(i, ErrHeld))
			continue
		}
		mayHold[i] = true
		granted = append(granted, i)
		fence = max(fence, rep.counter)
		if probe {
			addr := nodeAddr(g.clients[i])
			if left := g.q.observe(i, addr, rep.runID, rep.uptime, at, period, g.cfg.logger); left > 0 {
				quarantined = append(quarantined, NodeError{Index: i, Addr: addr, Err: &quarantinedError{left: left}})
				continue
			}
		}
		counted++
	}
	if counted < g.quorum {
		g.cleanup(ctx, "acquire", pkey, token, prior, mayHold)
		fails := append(refused, quarantined...)
		sortNodeErrors(fails)
		return nil, fmt.Errorf("redlock: acquire: %w", &QuorumError{Op: "acquire", Needed: g.quorum, Got: counted, Nodes: fails})
	}

	if g.cfg.fenced {
		need := g.FencedQuorum()
		if len(granted) < need {
			g.cleanup(ctx, "fence", pkey, token, prior, mayHold)
			return nil, fmt.Errorf("redlock: fence: %w", &QuorumError{Op: "fence", Needed: need, Got: len(granted), Nodes: refused})
		}
		if fence == math.MaxInt64 {
			g.cleanup(ctx, "acquire", pkey, token, prior, mayHold)
			return nil, fmt.Errorf("redlock: acquire: %w: %w", ErrNotAcquired, &CounterError{Reason: CounterOverflow})
		}
		fence++
		fargs := []string{token, luakit.FormatInt64(fence)}
		fres, fsettled := g.fanout(ctx, granted, prior, func(ctx context.Context, i int) rueidis.RedisResult {
			return g.exec(ctx, fenceScript, g.clients[i], keys, fargs, true)
		})
		prior = prior.with(fsettled)
		confirmed := 0
		fails := refused
		for _, i := range granted {
			r := fres[i]
			err := decodeFence(r.msg, r.err)
			if err != nil {
				fails = append(fails, g.nodeError(i, err))
				continue
			}
			confirmed++
		}
		if confirmed < need {
			g.cleanup(ctx, "fence", pkey, token, prior, mayHold)
			sortNodeErrors(fails)
			return nil, fmt.Errorf("redlock: fence: %w", &QuorumError{Op: "fence", Needed: need, Got: confirmed, Nodes: fails})
		}
	}

	l := &Lease{name: key, fence: fence}
	l.b.g, l.b.pkey, l.b.token, l.b.prior = g, pkey, token, prior
	elapsed := time.Since(start)
	// Grant applies the validity rule: a majority whose last needed reply came after start + TTL −
	// drift allowance is a late reply, and the lock is then deleted from every node.
	if err := l.own.Grant(ctx, &l.b, &g.own, start, ttl); err != nil {
		if errors.Is(err, ErrLateReply) {
			return nil, &lateError{ttl: ttl, elapsed: elapsed, drift: drift}
		}
		return nil, fmt.Errorf("redlock: acquire: %w", err)
	}
	return l, nil
}

// Acquire calls [Group.TryAcquire] until it succeeds or ctx ends, sleeping between attempts a random
// delay drawn uniformly from [d/2, 3d/2) where d is the retry delay ([WithRetryDelay], default 200ms),
// so that contenders desynchronise. Every failed attempt was cleaned up before the next one starts.
//
// Unlike the other Coordkit primitives' blocking acquisitions it does not wake on key invalidations:
// contenders woken together by one release would split the nodes' votes, so that none gets a quorum;
// the Redlock algorithm retries after a random delay instead.
//
// It returns at once, without retrying, on errors that a retry cannot fix (invalid TTL or keys). When
// ctx ends it returns an error wrapping ctx.Err() and the last attempt's error.
func (g *Group) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lease, error) {
	ctx, sc, err := g.own.Begin(ctx, "ACQUIRE")
	if err != nil {
		return nil, err
	}
	v, err := g.acquire(ctx, key, ttl)
	sc.End(err)
	return v, err
}

// acquire is [Group.Acquire], run inside its hook scope.
func (g *Group) acquire(ctx context.Context, key string, ttl time.Duration) (_ *Lease, err error) {
	var last error // the previous attempt's ErrNotAcquired, kept when ctx ends during a later attempt
	for {
		l, err := g.tryAcquire(ctx, key, ttl)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			if last != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("%w (last attempt: %w)", err, last)
			}
			return nil, err
		}
		last = err
		d := g.cfg.retryDelay/2 + time.Duration(rand.Int64N(int64(g.cfg.retryDelay)))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redlock: acquire: %w (last attempt: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// verdict settles an extend or verify step in which confirmed nodes hold this owner's token and refused
// nodes do not: held when a quorum confirmed; not held (known) when the nodes left after the refusals
// are fewer than a quorum, so no majority can hold it; unknown otherwise (failures and timeouts leave
// both possible).
func (g *Group) verdict(confirmed, refused int) (held, known bool) {
	switch {
	case confirmed >= g.quorum:
		return true, true
	case len(g.clients)-refused < g.quorum:
		return false, true
	}
	return false, false
}

// nodeResult is one node's reply in a fan-out.
type nodeResult struct {
	msg rueidis.RedisMessage
	err error
}

// inflight holds, per node, a channel for each earlier fan-out goroutine that may not have returned
// yet; a channel is closed when its goroutine returns, at which point its command has been queued on
// the node's connection or never will be. A nil inflight waits for nothing.
type inflight [][]chan struct{}

// with returns in extended by the goroutines of one fan-out (settled, indexed by node; nil entries
// for nodes it did not run on), dropping those that already returned. It does not modify in.
func (in inflight) with(settled []chan struct{}) inflight {
	out := make(inflight, max(len(in), len(settled)))
	for i := range out {
		if i < len(in) {
			for _, prev := range in[i] {
				if !isClosed(prev) {
					out[i] = append(out[i], prev)
				}
			}
		}
		if i < len(settled) && settled[i] != nil && !isClosed(settled[i]) {
			out[i] = append(out[i], settled[i])
		}
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// fanout runs f on the nodes in idx (every node when idx is nil) in parallel under one context bounded
// by the node timeout, and returns when every node replied or that context ended, whichever is first.
// The result is indexed by node; a node without a reply by then gets the context's cause
// (context.DeadlineExceeded after the node timeout, else ctx's error). settled (indexed by node, nil
// for nodes not in idx) reports when each node's goroutine has returned; pass it on through
// [inflight.with] to the next step on the same key.
//
// On node i, f runs only after every goroutine in after[i] returned (bounded by the same context), so
// that a command of this step is queued on the node's connection behind those of earlier steps, never
// ahead of one that a preempted or still-connecting goroutine has yet to queue.
//
// Returning at the timeout rather than when f returns matters for a node whose connection is still
// being made: rueidis bounds its handshake by the dialer timeout, not by cancellation, so f can block
// for seconds on a node that accepted the TCP connection but does not answer (paused, hung). Such a
// goroutine finishes on its own and does not send its command then, because rueidis checks the
// context, ended by then, before queueing it.
func (g *Group) fanout(ctx context.Context, idx []int, after inflight, f func(ctx context.Context, i int) rueidis.RedisResult) (out []nodeResult, settled []chan struct{}) {
	if idx == nil {
		idx = make([]int, len(g.clients))
		for i := range idx {
			idx[i] = i
		}
	}
	nctx, stop := g.nodeContext(ctx)
	defer stop()
	type reply struct {
		node int
		nodeResult
	}
	replies := make(chan reply, len(idx)) // buffered: a goroutine given up on never blocks
	settled = make([]chan struct{}, len(g.clients))
	for _, i := range idx {
		settled[i] = make(chan struct{})
		go func() {
			defer close(settled[i])
			if err := waitSettled(nctx, after, i); err != nil {
				replies <- reply{i, nodeResult{err: err}}
				return
			}
			msg, err := f(nctx, i).ToMessage()
			replies <- reply{i, nodeResult{msg: msg, err: err}}
		}()
	}
	out = make([]nodeResult, len(g.clients))
	done := make([]bool, len(g.clients))
	take := func(r reply) {
		if r.err != nil && nctx.Err() != nil {
			r.err = context.Cause(nctx)
		}
		out[r.node], done[r.node] = r.nodeResult, true
	}
	for pending := len(idx); pending > 0; pending-- {
		select {
		case r := <-replies:
			take(r)
		case <-nctx.Done():
			for drained := false; !drained; { // keep the replies that arrived with the timeout
				select {
				case r := <-replies:
					take(r)
				default:
					drained = true
				}
			}
			for _, i := range idx {
				if !done[i] {
					out[i] = nodeResult{err: context.Cause(nctx)}
				}
			}
			return out, settled
		}
	}
	return out, settled
}

// waitSettled waits until every goroutine in after[i] returned, or ctx ends (its cause).
func waitSettled(ctx context.Context, after inflight, i int) error {
	if i >= len(after) {
		return nil
	}
	for _, ch := range after[i] {
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// nodeContext returns the context of a fan-out's node commands: cancelled after the node timeout (cause
// context.DeadlineExceeded) or when ctx ends (cause ctx.Err()), but carrying no deadline.
//
// The missing deadline is deliberate. rueidis sends a command that carries a deadline on an idle
// connection synchronously with a socket deadline, and closes the connection when it passes; the
// cleanup that follows would then travel on a new connection and could reach the node before the
// timed-out SET still sitting in the old one, or not at all while the new connection's handshake is
// slow. Without a deadline the command goes through the connection's pipeline queue: giving up on it
// leaves the connection open, and the owner-checked cleanup, sent like every node command through
// luakit's Script.ExecOrdered (always the client's first connection), is queued behind the late command
// on that connection, so the node runs them in order.
func (g *Group) nodeContext(ctx context.Context) (context.Context, func()) {
	nctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopParent := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	timer := time.AfterFunc(g.cfg.nodeTimeout, func() { cancel(context.DeadlineExceeded) })
	return nctx, func() {
		timer.Stop()
		stopParent()
		cancel(context.Canceled)
	}
}

// cleanup sends an owner-checked delete to every node, each queued behind the commands of the earlier
// steps in after, bounded by the cleanup timeout and the node timeout even when ctx is cancelled. It
// logs the nodes that did not reply (deleted, absent or held by another owner all count as replies)
// among those that may hold the token: mayHold[i] is false for a node known not to hold it (it refused
// the lock, or its script failed before writing); nil means every node may. It returns its own
// goroutines (indexed by node; see [Group.fanout]).
func (g *Group) cleanup(ctx context.Context, op, pkey, token string, after inflight, mayHold []bool) []chan struct{} {
	keys, args := []string{pkey}, []string{token}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.cleanupTimeout())
	defer cancel()
	res, settled := g.fanout(cctx, nil, after, func(ctx context.Context, i int) rueidis.RedisResult {
		return releaseScript.ExecOrdered(ctx, g.clients[i], keys, args)
	})
	replied := 0
	var fails []NodeError
	for i, r := range res {
		if _, err := decodeRelease(r.msg, r.err); err != nil {
			if mayHold == nil || mayHold[i] {
				fails = append(fails, g.nodeError(i, err))
			}
			continue
		}
		replied++
	}
	if len(fails) > 0 {
		var b strings.Builder
		writeNodeErrors(&b, fails)
		g.cfg.logger.Warn("coordkit/redlock: cleanup not confirmed by a node that may hold the token; the lock may stay there until its TTL",
			slog.String("op", op), slog.Int("replied", replied), slog.Int("nodes", len(g.clients)),
			slog.String("failed", b.String()))
	}
	return settled
}

// mayHaveRun reports whether a node whose acquisition failed may hold this attempt's token, by the
// ownership core's rule (see [ownership.CleanupOwed]): replyErr is the node's reply error (nil when it
// answered), err the decoder's error for an answered reply; a counter that cannot issue tokens is a
// refusal the script answered before writing.
func mayHaveRun(replyErr, err error) bool {
	var ce *CounterError
	return ownership.CleanupOwed(replyErr, replyErr == nil && !errors.As(err, &ce))
}

// exec runs s on one node with ExecOrdered; with acked and WithReplicaAck, followed by the
// acknowledgement ([luakit.Script.ExecOrderedAck]), and a write that was not acknowledged comes back as
// its [*luakit.AckError] (uncertain: the node may hold the token, so it is cleaned up like a node that
// did not answer).
func (g *Group) exec(ctx context.Context, s *luakit.Script, c rueidis.Client, keys, args []string, acked bool) rueidis.RedisResult {
	if !acked || !g.cfg.ack.Enabled() {
		return s.ExecOrdered(ctx, c, keys, args)
	}
	resp, ackErr := s.ExecOrderedAck(ctx, c, g.cfg.ack, keys, args)
	if ackErr != nil {
		return rueidis.NewErrorResult(ackErr)
	}
	return resp
}

// nodeError builds the NodeError of node i, marking transport failures as uncertain.
func (g *Group) nodeError(i int, err error) NodeError {
	var re *rueidis.RedisError
	if !errors.As(err, &re) && luakit.IsUncertain(err) {
		err = fmt.Errorf("%w: %w", ErrUncertain, err)
	}
	return NodeError{Index: i, Addr: nodeAddr(g.clients[i]), Err: err}
}

// nodeAddr returns the address of a standalone or Sentinel client's current node, or "".
func nodeAddr(c rueidis.Client) string {
	m := c.Nodes()
	if len(m) != 1 {
		return ""
	}
	for a := range m {
		return a
	}
	return ""
}

func sortNodeErrors(s []NodeError) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Index < s[j-1].Index; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// endAcquire completes an acquisition's hook scope: no majority because other owners hold the lock is
// an answer, not a failure; an uncertain attempt or an ended ctx is not.
func endAcquire(ctx context.Context, sc *luakit.Scope, err error) {
	if errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrUncertain) && ctx.Err() == nil {
		sc.EndWith(luakit.OutcomeSucceeded, err)
		return
	}
	sc.End(err)
}
