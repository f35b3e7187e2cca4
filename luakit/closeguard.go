package luakit

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// GuardClose returns c wrapped so that once Close has been called every later command fails at once
// with rueidis.ErrClosing, without reaching the network (why: see the package documentation,
// "Closed clients"). Before Close the wrapper only adds one atomic load per call; Close closes c.
// [NewTrackedClient] applies this guard.
//
// Guarded: Do, DoMulti, DoCache, DoMultiCache, Receive, Dedicated and Dedicate (a dedicated client
// taken before Close is not guarded; Dedicate after Close returns a client whose commands fail with
// ErrClosing), and the clients Nodes returns (they share this client's closed state; Close on one of
// them closes only that node's client, as in rueidis). DoStream and DoMultiStream are passed
// through unguarded (rueidis offers no way to build a failed stream). B and Mode are unchanged.
//
// GuardClose(nil) returns nil. The wrapper is safe for concurrent use, as c is.
func GuardClose(c rueidis.Client) rueidis.Client {
	if c == nil {
		return nil
	}
	if g, ok := c.(*closeGuard); ok {
		return g
	}
	return &closeGuard{Client: c, closed: new(atomic.Bool)}
}

type closeGuard struct {
	rueidis.Client
	closed  *atomic.Bool
	node    bool     // a client from Nodes: Close closes only it
	tracker *Tracker // set by NewTrackedClient; see TrackerOf
}

func (g *closeGuard) Close() {
	if !g.node {
		g.closed.Store(true)
	}
	g.Client.Close()
}

func (g *closeGuard) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if g.closed.Load() {
		return rueidis.NewErrorResult(rueidis.ErrClosing)
	}
	return g.Client.Do(ctx, cmd)
}

func (g *closeGuard) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	if g.closed.Load() {
		return closedResults(len(multi))
	}
	return g.Client.DoMulti(ctx, multi...)
}

func (g *closeGuard) DoCache(ctx context.Context, cmd rueidis.Cacheable, ttl time.Duration) rueidis.RedisResult {
	if g.closed.Load() {
		return rueidis.NewErrorResult(rueidis.ErrClosing)
	}
	return g.Client.DoCache(ctx, cmd, ttl)
}

func (g *closeGuard) DoMultiCache(ctx context.Context, multi ...rueidis.CacheableTTL) []rueidis.RedisResult {
	if g.closed.Load() {
		return closedResults(len(multi))
	}
	return g.Client.DoMultiCache(ctx, multi...)
}

func (g *closeGuard) Receive(ctx context.Context, subscribe rueidis.Completed, fn func(msg rueidis.PubSubMessage)) error {
	if g.closed.Load() {
		return rueidis.ErrClosing
	}
	return g.Client.Receive(ctx, subscribe, fn)
}

func (g *closeGuard) Dedicated(fn func(rueidis.DedicatedClient) error) error {
	if g.closed.Load() {
		return rueidis.ErrClosing
	}
	return g.Client.Dedicated(fn)
}

func (g *closeGuard) Dedicate() (rueidis.DedicatedClient, func()) {
	d, cancel := g.Client.Dedicate()
	if g.closed.Load() {
		return closedDedicated{d}, cancel
	}
	return d, cancel
}

func (g *closeGuard) Nodes() map[string]rueidis.Client {
	nodes := g.Client.Nodes()
	out := make(map[string]rueidis.Client, len(nodes))
	for addr, n := range nodes {
		out[addr] = &closeGuard{Client: n, closed: g.closed, node: true}
	}
	return out
}

// closedDedicated is a dedicated client taken after Close: its commands fail with ErrClosing.
type closedDedicated struct{ rueidis.DedicatedClient }

func (closedDedicated) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	return rueidis.NewErrorResult(rueidis.ErrClosing)
}

func (closedDedicated) DoMulti(_ context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	return closedResults(len(multi))
}

func (closedDedicated) Receive(context.Context, rueidis.Completed, func(rueidis.PubSubMessage)) error {
	return rueidis.ErrClosing
}

func closedResults(n int) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, n)
	for i := range out {
		out[i] = rueidis.NewErrorResult(rueidis.ErrClosing)
	}
	return out
}
