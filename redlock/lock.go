package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// ReleaseOutcome is the result of [Lease.Release]: the shared [ownership.Outcome], so outcomes compare
// equal across Coordkit's primitives. The zero value is not an outcome: Release returns it only with an
// error.
type ReleaseOutcome = ownership.Outcome

// The release outcomes (see [ownership.Outcome]).
const (
	Released        = ownership.Released        // a quorum replied and at least one node deleted this owner's token
	AlreadyReleased = ownership.AlreadyReleased // an earlier release that a quorum answered settled it
	NotOwned        = ownership.NotOwned        // a quorum replied and no node held this owner's token
)

// Lease is a lease acquired by [Group.TryAcquire] or [Group.Acquire]: a random owner token held, with the
// lock's TTL, by at least a majority of the group's nodes. Its methods Extend, ExtendTTL, KeepAlive,
// Verify, Release, Close, Done, Context, Err, Remaining, Deadline and TTL behave as the contract in
// package github.com/coordkit/coordkit/luakit/ownership says. What differs:
//
//   - The local estimate ends at send time + TTL − drift allowance (TTL × drift factor + 2ms), and
//     ExtendTTL's ttl must exceed that allowance ([ErrInvalidTTL] before any I/O otherwise).
//   - A quorum stands for the server. Extend and Verify hold when a majority confirms, and find the lock
//     lost when the nodes that lack the token leave no majority possible (a lost renewal then deletes
//     the token wherever it is left); anything between is uncertain, a [*QuorumError].
//   - Release reports [Released] when a quorum replied and one of them deleted the token, [NotOwned]
//     when a quorum replied without it; once sent it runs to the node timeout whatever ctx does.
//     Close's bound (the cleanup timeout) is the node timeout.
//
// A Lease is safe for concurrent use; it owns no goroutine (its KeepAlive's renewals are sent by the
// Group's keep-alive scheduler).
type Lease struct {
	own   ownership.Handle
	b     backend
	name  string // the key as the caller gave it
	fence int64
}

//go:generate go run ../tools/cmd/handlegen -type Lease -noun lease -recv l -ttl "whole milliseconds, more than the drift allowance"

// Name returns the key as given to TryAcquire (without the key prefix).
func (l *Lease) Name() string { return l.name }

// OwnerToken returns the random 128-bit owner token (32 hex characters) held on the nodes; it guards
// renewal, verification and release. Keep it private: never log it or use it as a metric attribute.
func (l *Lease) OwnerToken() string { return l.b.token }

// FencingToken returns the lock's fencing token in fenced mode ([WithFencing]): a positive int64, equal
// across renewals. Without fencing it returns 0. See the package documentation for what the token does
// and does not guarantee.
func (l *Lease) FencingToken() int64 { return l.fence }

// backend is a Lease's [ownership.Backend]: each method sends one owner-checked script to every node in
// parallel (a fan-out bounded by the node timeout) and settles the answer by quorum.
type backend struct {
	g     *Group
	pkey  string // physical key
	token string

	mu    sync.Mutex // guards prior: Verify runs beside the Handle's serialised Extend and Release
	prior inflight   // node goroutines of this lock's earlier steps that may still be running
}

// after returns the goroutines a new step's node commands must be queued behind.
func (b *backend) after() inflight {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.prior
}

// settle adds a step's goroutines to those that later steps are queued behind.
func (b *backend) settle(settled []chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prior = b.prior.with(settled)
}

// send runs s on every node, each node's command queued behind this lock's earlier commands there;
// with acked, acknowledged as WithReplicaAck says ([Group.exec]).
func (b *backend) send(ctx context.Context, s *luakit.Script, args []string, acked bool) []nodeResult {
	g := b.g
	keys := []string{b.pkey}
	res, settled := g.fanout(ctx, nil, b.after(), func(ctx context.Context, i int) rueidis.RedisResult {
		return g.exec(ctx, s, g.clients[i], keys, args, acked)
	})
	b.settle(settled)
	return res
}

// Extend resets the TTL on every node that still holds the token (see [Group.verdict]). When no quorum
// can hold it any more, the token is deleted wherever it is left (best-effort, bounded by the node
// timeout) before Extend reports false.
func (b *backend) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if t, _, err := b.g.timing(ttl); err != nil || t != ttl {
		return false, fmt.Errorf("%w (got %v)", ErrInvalidTTL, ttl)
	}
	b.g.q.learn(ttl)
	res := b.send(ctx, extendScript, []string{b.token, luakit.FormatInt64(ttl.Milliseconds())}, true)
	held, mayHold, err := b.tally("extend", res, decodeExtend)
	if err == nil && !held {
		b.settle(b.g.cleanup(ctx, "extend", b.pkey, b.token, b.after(), mayHold))
	}
	return held, err
}

// Verify asks every node whether it holds the token (see [Group.verdict]). The nodes answer at slightly
// different instants: the result is not a snapshot of one moment.
func (b *backend) Verify(ctx context.Context) (bool, error) {
	held, _, err := b.tally("verify", b.send(ctx, verifyScript, []string{b.token}, false), decodeVerify)
	return held, err
}

// tally settles an extend or verify step from each node's decoded reply: nil confirms, ErrNotOwner
// refuses, anything else leaves that node unknown. mayHold marks, per node, whether it may still hold
// the token (it did not refuse).
func (b *backend) tally(op string, res []nodeResult, decode func(rueidis.RedisMessage, error) error) (held bool, mayHold []bool, err error) {
	g := b.g
	confirmed, refused := 0, 0
	mayHold = make([]bool, len(res))
	var fails []NodeError
	for i, r := range res {
		err := decode(r.msg, r.err)
		mayHold[i] = !errors.Is(err, ErrNotOwner)
		if err == nil {
			confirmed++
			continue
		}
		if !mayHold[i] {
			refused++
		}
		fails = append(fails, g.nodeError(i, err))
	}
	if held, known := g.verdict(confirmed, refused); known {
		return held, mayHold, nil
	}
	return false, mayHold, &QuorumError{Op: op, Needed: g.quorum, Got: confirmed, Nodes: fails}
}

// Release deletes the token on every node. Once sent, the deletes run to the node timeout even when ctx
// ends. removed: a quorum replied and one of them deleted it; fewer than a quorum replying is an error.
func (b *backend) Release(ctx context.Context) (bool, error) {
	g := b.g
	res := b.send(context.WithoutCancel(ctx), releaseScript, []string{b.token}, false)
	replied, deleted := 0, 0
	var fails []NodeError
	for i, r := range res {
		n, err := decodeRelease(r.msg, r.err)
		if err != nil {
			fails = append(fails, g.nodeError(i, err))
			continue
		}
		replied++
		if n == 1 {
			deleted++
		}
	}
	if replied < g.quorum {
		return false, &QuorumError{Op: "release", Needed: g.quorum, Got: replied, Nodes: fails}
	}
	return deleted > 0, nil
}
