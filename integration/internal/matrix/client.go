package matrix

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// NoCache is a client mutation for NewClient that turns client-side caching off.
func NoCache(o *rueidis.ClientOption) { o.DisableCache = true }

// OneConn is a client mutation for NewClient that gives each server one pipelining connection
// (PipelineMultiplex -1). rueidis otherwise keeps 2^PipelineMultiplex of them per standalone server
// (two on two CPUs), sends each keyed command on one at random and dials each on first use, so a
// scenario that warms a client and then pauses the server could send its command on a connection
// that is not dialled yet: it would wait in the handshake until the dial timeout, ignoring ctx,
// instead of being in flight.
func OneConn(o *rueidis.ClientOption) { o.PipelineMultiplex = -1 }

// NewClient returns a new client of the target for code under test, closed at t's cleanup. It starts
// from ClientOption (testkit's defaults, client-side caching on), applies mutate in order, and is
// built by luakit.NewTrackedClient when tracker is not nil, by rueidis.NewClient otherwise. A client
// that cannot be built fails t.
func (e *Env) NewClient(t testing.TB, tracker *luakit.Tracker, mutate ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt := e.ClientOption()
	for _, m := range mutate {
		m(&opt)
	}
	var (
		c   rueidis.Client
		err error
	)
	if tracker != nil {
		c, err = luakit.NewTrackedClient(opt, tracker)
	} else {
		c, err = rueidis.NewClient(opt)
	}
	if err != nil {
		t.Fatalf("target %s: new client: %v", e.Name, err)
	}
	t.Cleanup(c.Close)
	return c
}

// PTTL returns the server's PTTL of key in milliseconds (-2 absent, -1 no expiry), read through the
// assertion client. A failed read fails t.
func (e *Env) PTTL(t testing.TB, key string) int64 {
	t.Helper()
	return PTTL(t, e.Raw, key)
}

// PTTL returns the PTTL of key in milliseconds (-2 absent, -1 no expiry) as c reads it, for a suite
// that reads servers other than its Env's (redlock's nodes). A failed read fails t.
func PTTL(t testing.TB, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(Ctx(t), c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL %q: %v", key, err)
	}
	return n
}
