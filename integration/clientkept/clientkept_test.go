package clientkept_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
	"github.com/coordkit/coordkit/testkit"
)

// closer is one primitive's way of ending something it built over the caller's client.
type closer struct {
	name string
	// run builds the primitive over c, uses it once, and ends it with its Close, Shutdown or Stop.
	// skip reports a target that lacks a feature the primitive needs.
	run func(t *testing.T, c rueidis.Client, e *matrix.Env, mt testkit.Target) (skip bool)
}

// closers lists lock, lease, rwlock, semaphore and redlock; counter, leader and ratelimit check the same
// in their own suites (integration/counter 14, integration/leader client_stays_the_callers,
// integration/ratelimit limiter_close_keeps_callers_client).
var closers = []closer{
	{"lock_lease_close", func(t *testing.T, c rueidis.Client, _ *matrix.Env, _ testkit.Target) bool {
		lk, err := lock.New(c)
		require.NoError(t, err)
		l, err := lk.TryAcquire(ctx(t), "ck:kept:lock", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		return false
	}},
	{"lease_close", func(t *testing.T, c rueidis.Client, _ *matrix.Env, _ testkit.Target) bool {
		ls, err := lease.New(c)
		require.NoError(t, err)
		l, err := ls.TryAcquire(ctx(t), "ck:kept:lease", "f", time.Minute)
		if errors.Is(err, luakit.ErrUnsupported) {
			return true
		}
		require.NoError(t, err)
		require.NoError(t, l.Close())
		return false
	}},
	{"rwlock_read_and_write_close", func(t *testing.T, c rueidis.Client, _ *matrix.Env, _ testkit.Target) bool {
		lk, err := rwlock.New(c)
		require.NoError(t, err)
		r, err := lk.TryAcquireRead(ctx(t), "ck:kept:rw", time.Minute)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		w, err := lk.TryAcquireWrite(ctx(t), "ck:kept:rw", time.Minute)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		return false
	}},
	{"semaphore_permit_and_semaphore_close", func(t *testing.T, c rueidis.Client, _ *matrix.Env, _ testkit.Target) bool {
		s, err := semaphore.New(c, "ck:kept:sem", 2)
		require.NoError(t, err)
		p, err := s.TryAcquire(ctx(t), time.Minute)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		require.NoError(t, s.Close(ctx(t)))
		require.NoError(t, s.Close(ctx(t)))
		return false
	}},
	{"redlock_lock_close", func(t *testing.T, c rueidis.Client, e *matrix.Env, mt testkit.Target) bool {
		if e.IsCluster() {
			return true // Redlock runs over independent standalone nodes
		}
		// c and clients of two more servers of the target: Redlock's nodes are independent.
		clients := []rueidis.Client{c}
		for range 2 {
			srv := testkit.Start(t, mt)
			oc, err := rueidis.NewClient(srv.ClientOption())
			require.NoError(t, err)
			t.Cleanup(oc.Close)
			clients = append(clients, oc)
		}
		g, err := redlock.NewGroup(clients, redlock.WithRestartQuarantine(false))
		require.NoError(t, err)
		l, err := g.TryAcquire(ctx(t), "ck:kept:redlock", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		return false
	}},
}

// TestCloseKeepsClient: after each primitive's Close the caller's client still answers, and a second
// primitive over the same client works.
func TestCloseKeepsClient(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := matrix.StartEnv(t, mt)
		for _, cl := range closers {
			t.Run(cl.name, func(t *testing.T) {
				c := e.NewClient(t, nil)
				if cl.run(t, c, e, mt.Server) {
					t.Skipf("%s does not offer what %s needs", mt.Name, cl.name)
				}
				require.NoError(t, c.Do(ctx(t), c.B().Ping().Build()).Error(), "the client must still work after Close")
				lk, err := lock.New(c)
				require.NoError(t, err)
				l, err := lk.TryAcquire(ctx(t), "ck:kept:after:"+cl.name, time.Minute)
				require.NoError(t, err, "a primitive over the same client works afterwards")
				_, err = l.Release(ctx(t))
				require.NoError(t, err)
			})
		}
	})
}

// ctx returns a context for one test's I/O.
func ctx(t *testing.T) context.Context { return matrix.Ctx(t) }
