package lock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// serverFast reports which conditional commands the target has, probed on the assertion client:
// SET ... IFEQ, and the conditional delete (DELIFEQ or DELEX ... IFEQ) with its command name.
func serverFast(t *testing.T, e *env) (set bool, del string) {
	t.Helper()
	set, err := luakit.Probe(ctx(t), e.Raw, luakit.ConditionalSet)
	require.NoError(t, err)
	if ok, err := luakit.Probe(ctx(t), e.Raw, luakit.DelIfEq); err == nil && ok {
		return set, "DELIFEQ"
	}
	if ok, err := luakit.Probe(ctx(t), e.Raw, luakit.DelEx); err == nil && ok {
		return set, "DELEX"
	}
	return set, ""
}

// answer is what one owner-checked operation answered, in the terms both paths must agree on.
type answer struct {
	Held     bool // Extend's bool
	Outcome  lock.ReleaseOutcome
	Foreign  bool         // the error matches ErrForeignData
	Class    luakit.Class // luakit.Classify of the error (ClassUnknown for nil)
	Failed   bool         // an error
	Remains  bool         // the lease key still exists afterwards
	Expiring bool         // ... with an expiry
}

// 22. Extend and Release answer the same through the conditional commands (SET IFEQ PX, DELIFEQ /
// DELEX IFEQ, where the server has them) and through the scripts, for this owner's lease, a lease
// without expiry, another owner's value, an absent key and a key of another type; and each path sends
// the commands it should (counted on the client's connections).
func testConditionalAnswers(t *testing.T, e *env) {
	hasSet, del := serverFast(t, e)
	t.Logf("server: SET IFEQ %v, conditional delete %q", hasSet, del)
	type tamper func(t *testing.T, leaseKey string)
	cases := []struct {
		name   string
		tamper tamper
		want   answer // Extend's and Release's shared expectations (Outcome is Release's)
	}{
		{"own", func(*testing.T, string) {}, answer{Held: true, Outcome: lock.Released}},
		{"own_without_expiry", func(t *testing.T, k string) { e.do(t, "PERSIST", k) }, answer{Held: true, Outcome: lock.Released}},
		{"other_owner", func(t *testing.T, k string) { e.do(t, "SET", k, "someone-else", "PX", "60000") },
			answer{Outcome: lock.NotOwned, Remains: true, Expiring: true}},
		{"absent", func(t *testing.T, k string) { e.do(t, "DEL", k) }, answer{Outcome: lock.NotOwned}},
		{"foreign_type", func(t *testing.T, k string) {
			e.do(t, "DEL", k)
			e.do(t, "HSET", k, "f", "v")
		}, answer{Foreign: true, Class: luakit.ClassTerminal, Failed: true, Remains: true}},
	}
	paths := []struct {
		name string
		on   bool
	}{{"conditional", true}, {"scripts", false}}
	got := map[string]map[string][2]answer{} // path -> case -> {extend, release}
	for _, p := range paths {
		got[p.name] = map[string][2]answer{}
		counter := newCmdCounter()
		l := newLocker(t, e.NewClient(t, nil, counter.counted()...), lock.WithConditionalCommands(p.on))
		// Warm up: the probe and the scripts' digests, so the counts below are the steady state.
		warm, err := l.TryAcquire(ctx(t), "ck:s22:warm:"+p.name, time.Minute)
		require.NoError(t, err)
		_, err = warm.Extend(ctx(t))
		require.NoError(t, err)
		release(t, warm, lock.Released)
		for _, tc := range cases {
			var pair [2]answer
			for i, op := range []string{"extend", "release"} {
				name := "ck:s22:" + p.name + ":" + tc.name + ":" + op
				lk, _ := lock.Keys(name)
				lease, err := l.TryAcquire(ctx(t), name, time.Minute)
				require.NoError(t, err)
				tc.tamper(t, lk)
				before := counter.snapshot()
				var a answer
				if op == "extend" {
					a.Held, err = lease.Extend(ctx(t))
				} else {
					a.Outcome, err = lease.Release(ctx(t))
				}
				d, _ := delta(before, counter.snapshot())
				fast := p.on && (op == "extend" && hasSet || op == "release" && del != "")
				switch {
				case fast && op == "extend":
					require.Equal(t, map[string]int64{"SET": 1}, d, "%s %s: commands", tc.name, op)
				case fast:
					require.Equal(t, map[string]int64{del: 1}, d, "%s %s: commands", tc.name, op)
				default: // EVALSHA; on a Cluster node that has not run the script yet, then EVAL
					require.Equal(t, map[string]int64{"EVALSHA": 1}, map[string]int64{"EVALSHA": d["EVALSHA"]}, "%s %s: commands %v", tc.name, op, d)
					require.Len(t, d, 1+min(1, int(d["EVAL"])), "%s %s: commands %v", tc.name, op, d)
				}
				a.Failed = err != nil
				a.Foreign = errors.Is(err, luakit.ErrForeignData)
				if err != nil {
					a.Class = luakit.Classify(err)
				}
				pttl := e.PTTL(t, lk)
				a.Remains, a.Expiring = pttl != -2, pttl > 0
				if op == "extend" && a.Held {
					require.Greater(t, pttl, int64(50_000), "%s: extend renews at the lease's TTL", tc.name)
					a.Remains, a.Expiring = false, false // the shared expectation is Release's key state
					release(t, lease, lock.Released)
				}
				if op == "extend" && tc.name == "own_without_expiry" {
					require.True(t, a.Held)
				}
				e.do(t, "DEL", lk) // before Close, whose best-effort release would log a WRONGTYPE
				_ = lease.Close()
				pair[i] = a
			}
			got[p.name][tc.name] = pair
			want := tc.want
			wantExtend := answer{Held: want.Held, Foreign: want.Foreign, Class: want.Class, Failed: want.Failed, Remains: want.Remains, Expiring: want.Expiring}
			wantRelease := answer{Outcome: want.Outcome, Foreign: want.Foreign, Class: want.Class, Failed: want.Failed, Remains: want.Remains, Expiring: want.Expiring}
			require.Equal(t, wantExtend, pair[0], "%s %s: extend", p.name, tc.name)
			require.Equal(t, wantRelease, pair[1], "%s %s: release", p.name, tc.name)
		}
		counter.check(t)
	}
	require.Equal(t, got["scripts"], got["conditional"], "both paths must answer alike")
}

// 23. ACL: a user whose ACL allows the scripts and COMMAND DOCS (so the probe finds the conditional
// commands) but not DELIFEQ / DELEX still releases, through the release script; the refused command is
// tried once per Locker. A user without PEXPIRE extends through SET IFEQ on a server that has it, and
// is refused with nothing written on the others.
func testConditionalACL(t *testing.T, e *env) {
	hasSet, del := serverFast(t, e)
	base := append([]string{"~acl:lockc:*"}, matrix.ClientACL...)
	scripts := []string{"+evalsha", "+eval", "+evalsha_ro", "+eval_ro", "+get", "+set", "+incr", "+type", "+pttl", "+pexpire", "+del", "+command|docs"}

	t.Run("fast_delete_refused_falls_back", func(t *testing.T) {
		opt := e.ACLUser(t, "acl-lockc-nodel", append(append([]string{}, base...), scripts...)...)
		counter := newCmdCounter()
		opt.DialCtxFn = counter.dial
		l := newLocker(t, aclClient(t, opt), lock.WithKeyPrefix("acl:lockc:"))
		for i := range 2 {
			lease, err := l.TryAcquire(ctx(t), "fallback", time.Minute)
			require.NoError(t, err, "cycle %d", i)
			ok, err := lease.Extend(ctx(t))
			require.NoError(t, err, "cycle %d: extend (SET IFEQ is allowed)", i)
			require.True(t, ok)
			out, err := lease.Release(ctx(t))
			require.NoError(t, err, "cycle %d: release falls back to the script", i)
			require.Equal(t, lock.Released, out)
		}
		n := counter.snapshot()
		if del != "" {
			require.EqualValues(t, 1, n[del], "the refused %s is tried once per Locker", del)
		} else {
			require.Zero(t, n["DELIFEQ"]+n["DELEX"])
		}
		if hasSet {
			require.EqualValues(t, 2, n["SET"], "extend went through SET IFEQ")
		}
		counter.check(t)
	})

	// The acquire script checks DEL before its first write (its cleanup), so a lock user always has
	// DEL; PEXPIRE is the extend script's alone.
	t.Run("set_ifeq_without_pexpire", func(t *testing.T) {
		opt := e.ACLUser(t, "acl-lockc-nopexpire", append(append([]string{}, base...), matrix.Without(scripts, "pexpire")...)...)
		l := newLocker(t, aclClient(t, opt), lock.WithKeyPrefix("acl:lockc:"))
		lease, err := l.TryAcquire(ctx(t), "nopexpire", 10*time.Second)
		require.NoError(t, err)
		lk, _ := lock.Keys("nopexpire")
		lk = "acl:lockc:" + lk
		ok, err := lease.ExtendTTL(ctx(t), time.Minute)
		if hasSet {
			require.NoError(t, err)
			require.True(t, ok)
			require.Greater(t, e.PTTL(t, lk), int64(10_000), "renewed by SET IFEQ PX")
		} else {
			require.ErrorIs(t, err, luakit.ErrNoPermission, "the extend script needs PEXPIRE")
			require.LessOrEqual(t, e.PTTL(t, lk), int64(10_000), "nothing written")
		}
		_, err = lease.Release(ctx(t))
		require.NoError(t, err)
		e.requireAbsent(t, lk, "lease key")
	})
}

// aclClient returns a client authenticated as an ACL user (opt from matrix.Env.ACLUser), closed at t's
// cleanup.
func aclClient(t *testing.T, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
