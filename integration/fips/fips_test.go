//go:debug fips140=only

// Package fips_test runs every released module in FIPS 140-3 "only" mode (the //go:debug line above
// is GODEBUG=fips140=only for this test binary): a non-approved algorithm such as SHA-1 panics or
// fails. The package imports every released module, so their initialisation runs in that mode, and
// performs at least one real operation of each on every selected standalone server.
package fips_test

import (
	"context"
	"crypto/fips140"
	"crypto/sha1" //nolint:gosec // only to prove that SHA-1 is refused in this binary
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/otelhook"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/redlock"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
	"github.com/coordkit/coordkit/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.GoleakOptions()...) }

var echo = luakit.NewScript("echo", "return ARGV[1]")

// TestFIPS140Only: the mode is enforced in this binary (SHA-1 panics), and every released module
// works in it.
func TestFIPS140Only(t *testing.T) {
	require.True(t, fips140.Enforced(), "the //go:debug fips140=only line must apply to the test binary")
	require.Panics(t, func() { sha1.Sum(nil) }, "SHA-1 must be refused in fips140=only mode")

	for _, mt := range matrix.Targets() {
		if mt.Cluster {
			continue // the client's cryptography does not depend on the topology
		}
		t.Run(mt.Name, func(t *testing.T) {
			e := matrix.StartEnv(t, mt)
			srv := e.Srv
			client, err := luakit.NewTrackedClient(srv.ClientOption(), luakit.NewTracker())
			require.NoError(t, err)
			t.Cleanup(client.Close)
			c := matrix.Ctx(t)

			t.Run("luakit", func(t *testing.T) {
				before := execCounted(t, srv, client, echo, "fips") // EVAL, SCRIPT LOAD on the first target
				require.Regexp(t, "^[0-9a-f]{40}$", echo.SHA1(), "the digest, as the server reported it")
				after := execCounted(t, srv, client, echo, "fips")
				require.Equal(t, [2]int64{1, 0}, scriptCalls(before, after),
					"a call with the digest known and the script cached is one EVALSHA")
			})
			t.Run("luakit_acl", func(t *testing.T) {
				// A user allowed the script commands but not SCRIPT LOAD: the digest comes from
				// redis.sha1hex, run with EVAL (a new script per target, so that each learns it).
				opt := e.ACLUser(t, "fips", append([]string{"+eval", "+evalsha"}, matrix.ClientACL...)...)
				user, err := rueidis.NewClient(opt)
				require.NoError(t, err)
				t.Cleanup(user.Close)
				s := luakit.NewScript("acl", "return ARGV[1] -- "+mt.Name)
				before, err := srv.CommandStats(c)
				require.NoError(t, err)
				first := execCounted(t, srv, user, s, "acl")
				require.Equal(t, [2]int64{0, 2}, scriptCalls(before, first),
					"the script's EVAL, then the digest script's EVAL after SCRIPT LOAD was refused")
				require.Regexp(t, "^[0-9a-f]{40}$", s.SHA1())
				require.Equal(t, [2]int64{1, 0}, scriptCalls(first, execCounted(t, srv, user, s, "acl")))
			})
			t.Run("lock_otelhook", func(t *testing.T) {
				h, err := otelhook.New()
				require.NoError(t, err)
				l, err := lock.New(client, lock.WithHooks(h), lock.WithInstance("fips"))
				require.NoError(t, err)
				ls, err := l.TryAcquire(c, "fips:lock", time.Minute)
				require.NoError(t, err)
				require.Positive(t, ls.FencingToken())
				noError(t)(ls.Release(c))
			})
			t.Run("lease", func(t *testing.T) {
				ls, err := lease.New(client)
				require.NoError(t, err)
				l, err := ls.TryAcquire(c, "fips:leases", "worker", time.Minute)
				if ok, perr := luakit.Probe(c, client, luakit.HashFieldTTL); perr == nil && !ok {
					require.ErrorIs(t, err, luakit.ErrUnsupported, "%s has no hash-field expiry", mt.Name)
					return
				}
				require.NoError(t, err)
				noError(t)(l.Release(c))
			})
			t.Run("rwlock", func(t *testing.T) {
				locks, err := rwlock.New(client)
				require.NoError(t, err)
				r, err := locks.TryAcquireRead(c, "fips:rw", time.Minute)
				require.NoError(t, err)
				noError(t)(r.Release(c))
			})
			t.Run("semaphore", func(t *testing.T) {
				s, err := semaphore.New(client, "fips:sem", 2)
				require.NoError(t, err)
				p, err := s.TryAcquire(c, time.Minute)
				require.NoError(t, err)
				noError(t)(p.Release(c))
				require.NoError(t, s.Close(c))
			})
			t.Run("idempotency", func(t *testing.T) {
				st, err := idempotency.New(client)
				require.NoError(t, err)
				fp := idempotency.FingerprintOf("body")
				a, err := st.TryBegin(c, "fips:idem", time.Minute, fp)
				require.NoError(t, err)
				require.Equal(t, idempotency.Started, a.State)
				ok, err := st.Complete(c, "fips:idem", a.OwnerToken, []byte("done"), time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				a, err = st.TryBegin(c, "fips:idem", time.Minute, fp)
				require.NoError(t, err)
				require.Equal(t, idempotency.Completed, a.State)
				require.Equal(t, []byte("done"), a.Result)
			})
			t.Run("leader", func(t *testing.T) {
				run, stop := context.WithCancel(c)
				defer stop()
				var token int64
				el, err := leader.New(client, "fips:leader", leader.OnElected(func(_ context.Context, term leader.Term) error {
					token = term.FencingToken
					stop()
					return nil
				}))
				require.NoError(t, err)
				require.NoError(t, el.Run(run))
				require.Positive(t, token, "elected once")
			})
			t.Run("latch", func(t *testing.T) {
				ls, err := latch.New(client)
				require.NoError(t, err)
				l, err := ls.Create(c, "fips:latch", 1, latch.WithExpiry(time.Minute))
				require.NoError(t, err)
				j, err := ls.Join(c, "fips:latch")
				require.NoError(t, err)
				n, err := j.CountDown(c)
				require.NoError(t, err)
				require.Zero(t, n)
				require.NoError(t, l.Wait(c))
				noError(t)(l.Delete(c))
			})
			t.Run("redlock", func(t *testing.T) {
				nodes := make([]rueidis.Client, 3) // three databases of one server: independent keyspaces
				for i := range nodes {
					nodes[i] = srv.Client(t, func(o *rueidis.ClientOption) { o.SelectDB = i })
				}
				g, err := redlock.NewGroup(nodes, redlock.WithRestartQuarantine(false)) // the server just started
				require.NoError(t, err)
				l, err := g.TryAcquire(c, "fips:redlock", time.Minute)
				require.NoError(t, err)
				noError(t)(l.Release(c))
			})
			t.Run("counter", func(t *testing.T) {
				s, err := counter.New(client)
				require.NoError(t, err)
				res, err := s.IncrementUpTo(c, "fips:counter", 1, 10, time.Minute)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.EqualValues(t, 1, res.Value)
				require.NoError(t, s.Close(c))
			})
			t.Run("ratelimit", func(t *testing.T) {
				l, err := ratelimit.New(client, "fips:limit", ratelimit.GCRA{Burst: 2, EmissionInterval: time.Second})
				require.NoError(t, err)
				res, err := l.Allow(c)
				require.NoError(t, err)
				require.True(t, res.Allowed)
				require.NoError(t, l.Close(c))
			})
		})
	}
}

// execCounted runs s on client with ARGV {arg}, checks that it answers arg, and returns srv's
// commandstats after it.
func execCounted(t *testing.T, srv *testkit.Server, client rueidis.Client, s *luakit.Script, arg string) map[string]int64 {
	t.Helper()
	v, err := s.Exec(matrix.Ctx(t), client, nil, []string{arg}).ToString()
	require.NoError(t, err)
	require.Equal(t, arg, v)
	st, err := srv.CommandStats(matrix.Ctx(t))
	require.NoError(t, err)
	return st
}

// scriptCalls returns how many EVALSHA and EVAL calls the server ran between two commandstats.
func scriptCalls(before, after map[string]int64) [2]int64 {
	return [2]int64{after["evalsha"] - before["evalsha"], after["eval"] - before["eval"]}
}

// noError returns a function that fails t when its second argument, the error of a call's two
// results, is not nil: noError(t)(lease.Release(ctx)).
func noError(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		require.NoError(t, err)
	}
}
