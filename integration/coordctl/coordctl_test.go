package coordctl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/coordctl"
	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
)

// TestCoordctl runs every scenario on every target. Targets run in parallel (at most
// matrix.MaxParallelTargets at once), each with its own server or cluster; scenarios of one target run
// in order on it, each on its own keys.
func TestCoordctl(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, st matrix.Target) {
		e := startEnv(t, st)
		for _, sc := range []struct {
			name string
			run  func(*testing.T, *env)
		}{
			{"inspect_output", testInspectOutput},
			{"read_only", testReadOnly},
			{"admin", testAdmin},
			{"bad_input", testBadInput},
			{"watch", testWatch},
		} {
			t.Run(sc.name, func(t *testing.T) { sc.run(t, e) })
		}
	})
}

// fixture seeds one primitive's state through its module and returns the coordctl arguments of its
// inspection, the physical keys it uses, and a check of the decoded JSON.
type fixture struct {
	name  string
	setup func(t *testing.T, e *env) (args []string, keys []string, check func(t *testing.T, m map[string]any))
	// inspect runs the module's inspection function directly (for the command-count check).
	inspect func(t *testing.T, c rueidis.Client) error
}

func num(t *testing.T, m map[string]any, k string) int64 {
	t.Helper()
	v, ok := m[k].(float64)
	require.True(t, ok, "field %s missing or not a number in %v", k, m)
	return int64(v)
}

func between(t *testing.T, m map[string]any, k string, lo, hi time.Duration) {
	t.Helper()
	v := time.Duration(num(t, m, k)) * time.Millisecond
	require.True(t, v > lo && v <= hi, "%s = %v, want in (%v, %v]", k, v, lo, hi)
}

func fixtures() []fixture {
	return []fixture{
		{name: "lock", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			lk, err := lock.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			l, err := lk.TryAcquire(ctx(t), "ctl:lock", 30*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			ks, kf := lock.Keys("ctl:lock")
			return []string{"lock", "inspect", "ctl:lock"}, []string{ks, kf}, func(t *testing.T, m map[string]any) {
				require.Equal(t, "lock", m["primitive"])
				require.Equal(t, true, m["exists"])
				require.Equal(t, ks, m["lease_key"])
				require.Equal(t, l.FencingToken(), num(t, m, "fencing_token"))
				between(t, m, "remaining_ms", 20*time.Second, 30*time.Second)
				for k := range m {
					require.NotContains(t, k, "owner") // no owner token in any field
				}
				require.NotContains(t, fmt.Sprint(m), l.OwnerToken(), "no owner token in any value")
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			lk, _ := lock.New(c)
			_, err := lk.Inspect(ctx(t), "ctl:lock")
			return err
		}},
		{name: "lock_fair_queue", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			fl, err := lock.NewFair(e.NewClient(t, nil, matrix.NoCache), lock.WithWaitSlice(time.Minute))
			require.NoError(t, err)
			l, err := fl.TryAcquire(ctx(t), "ctl:fair", 30*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			wctx, cancel := context.WithCancel(ctx(t))
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = fl.Acquire(wctx, "ctl:fair", 20*time.Second) // queued until the cleanup cancels it
			}()
			t.Cleanup(func() { cancel(); <-done })
			ks, kf := lock.Keys("ctl:fair")
			require.Eventually(t, func() bool {
				in, err := fl.Inspect(ctx(t), "ctl:fair")
				return err == nil && in.Queued == 1
			}, 10*time.Second, time.Millisecond)
			// The waiter queues before it blocks on its grant list; wait for the block itself, so its
			// BLPOP (which Redis 7.0 counts when it blocks) lands before any command-count window.
			require.Eventually(t, func() bool { return e.BlockedIn(t, "blpop") }, 10*time.Second, time.Millisecond)
			return []string{"lock", "inspect", "ctl:fair"}, []string{ks, kf, "{ctl:fair}:queue"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, int64(1), num(t, m, "queued"))
				ws, ok := m["waiters"].([]any)
				require.True(t, ok, "waiters: %v", m["waiters"])
				require.Len(t, ws, 1)
				w := ws[0].(map[string]any)
				require.Equal(t, true, w["live"])
				require.Equal(t, int64(20000), num(t, w, "ttl_ms"))
				require.Equal(t, int64(60000), num(t, w, "slice_ms"))
				require.NotContains(t, fmt.Sprint(m), l.OwnerToken(), "no owner token in any value")
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			fl, _ := lock.NewFair(c)
			_, err := fl.Inspect(ctx(t), "ctl:fair")
			return err
		}},
		{name: "leader", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			// An election and a lock of one name share their keys: a held lock is a present leader.
			lk, err := lock.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			l, err := lk.TryAcquire(ctx(t), "ctl:leader", 15*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			ks, kf := lock.Keys("ctl:leader")
			return []string{"leader", "inspect", "ctl:leader"}, []string{ks, kf}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, l.FencingToken(), num(t, m, "fencing_token"))
				between(t, m, "remaining_ms", 5*time.Second, 15*time.Second)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			el, err := leader.New(c, "ctl:leader")
			require.NoError(t, err)
			_, err = el.Inspect(ctx(t))
			return err
		}},
		{name: "rwlock", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			lk, err := rwlock.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			for _, ttl := range []time.Duration{20 * time.Second, 30 * time.Second} {
				l, err := lk.TryAcquireRead(ctx(t), "ctl:rw", ttl)
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
			}
			// An expired reader left in the set (not pruned yet) is not reported. On a loaded machine the
			// grant can arrive after its 250ms estimate (ErrLateReply: the entry was removed again), which
			// leaves nothing expired to skip but the same expected view.
			if _, err := lk.TryAcquireRead(ctx(t), "ctl:rw", 250*time.Millisecond); !errors.Is(err, rwlock.ErrLateReply) {
				require.NoError(t, err)
			}
			time.Sleep(350 * time.Millisecond)
			return []string{"rwlock", "inspect", "ctl:rw"}, []string{"ctl:rw"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, "read", m["mode"])
				require.Equal(t, int64(2), num(t, m, "readers"))
				rs := m["readers_remaining_ms"].([]any)
				require.Len(t, rs, 2)
				require.Less(t, rs[0].(float64), rs[1].(float64))
				between(t, m, "key_remaining_ms", 20*time.Second, 30*time.Second)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			lk, _ := rwlock.New(c)
			_, err := lk.Inspect(ctx(t), "ctl:rw")
			return err
		}},
		{name: "semaphore", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			s, err := semaphore.New(e.NewClient(t, nil, matrix.NoCache), "ctl:sem", 3)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			p, err := s.TryAcquire(ctx(t), 30*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			p, err = s.TryAcquireNoExpiry(ctx(t))
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			return []string{"semaphore", "inspect", "ctl:sem"}, []string{"ctl:sem"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, int64(3), num(t, m, "capacity"))
				require.Equal(t, int64(2), num(t, m, "active"))
				require.Equal(t, int64(1), num(t, m, "free"))
				ps := m["permits_remaining_ms"].([]any)
				require.Len(t, ps, 2)
				require.Equal(t, float64(-1), ps[1]) // no expiry, listed last
				require.Equal(t, int64(-1), num(t, m, "key_remaining_ms"))
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			s, _ := semaphore.New(c, "ctl:sem", 1)
			_, err := s.Inspect(ctx(t))
			return err
		}},
		{name: "latch", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			ls, err := latch.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			l, err := ls.Create(ctx(t), "ctl:latch", 3, latch.WithExpiry(time.Minute))
			require.NoError(t, err)
			_, err = l.CountDown(ctx(t))
			require.NoError(t, err)
			return []string{"latch", "inspect", "ctl:latch"}, []string{"ctl:latch"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, "open", m["status"])
				require.Equal(t, l.Generation(), m["generation"])
				require.Equal(t, int64(2), num(t, m, "count"))
				require.Equal(t, int64(3), num(t, m, "initial"))
				between(t, m, "remaining_ms", 50*time.Second, time.Minute)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			ls, _ := latch.New(c)
			_, err := ls.Inspect(ctx(t), "ctl:latch")
			return err
		}},
		{name: "counter", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			s, err := counter.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close(context.Background()) })
			_, err = s.IncrementWithExpire(ctx(t), "ctl:counter", 5, time.Minute)
			require.NoError(t, err)
			return []string{"counter", "inspect", "ctl:counter"}, []string{"ctl:counter"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, int64(5), num(t, m, "value"))
				between(t, m, "remaining_ms", 50*time.Second, time.Minute)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			s, _ := counter.New(c)
			defer s.Close(context.Background())
			_, err := s.Inspect(ctx(t), "ctl:counter")
			return err
		}},
		{name: "idempotency", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			s, err := idempotency.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			a, err := s.TryBegin(ctx(t), "ctl:idem", 30*time.Second, idempotency.Fingerprint{})
			require.NoError(t, err)
			return []string{"idempotency", "inspect", "ctl:idem"}, []string{"ctl:idem"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, "pending", m["state"])
				require.Equal(t, a.Generation, num(t, m, "generation"))
				require.Equal(t, int64(30000), num(t, m, "ttl_ms"))
				between(t, m, "remaining_ms", 20*time.Second, 30*time.Second)
				require.NotContains(t, strings.Join(keysOf(m), ","), "owner")
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			s, _ := idempotency.New(c)
			_, err := s.Inspect(ctx(t), "ctl:idem")
			return err
		}},
		{name: "ratelimit", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			k, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
			require.NoError(t, err)
			t.Cleanup(func() { _ = k.Close(context.Background()) })
			r, err := k.AllowN(ctx(t), "ctl:rate", 3)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			return []string{"ratelimit", "inspect", "ctl:rate", "--policy", "fixed:10/1m"}, []string{"ctl:rate"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, int64(7), num(t, m, "remaining"))
				require.Equal(t, int64(10), num(t, m, "limit"))
				require.Equal(t, int64(0), num(t, m, "retry_after_ms"))
				between(t, m, "reset_ms", 50*time.Second, time.Minute)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			k, _ := ratelimit.NewKeyed(c, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
			defer k.Close(context.Background())
			_, err := k.Inspect(ctx(t), "ctl:rate")
			return err
		}},
		{name: "denylist", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			d, err := denylist.New(e.NewClient(t, nil, matrix.NoCache), "ctl:deny")
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close(context.Background()) })
			for _, id := range []string{"mallory", "eve"} {
				require.NoError(t, d.SetDenied(ctx(t), id, true))
			}
			return []string{"denylist", "inspect", "ctl:deny"}, []string{"ctl:deny"}, func(t *testing.T, m map[string]any) {
				require.Equal(t, true, m["exists"])
				require.Equal(t, int64(-1), num(t, m, "remaining_ms"), "a deny list has no expiry")
				require.Equal(t, []any{"eve", "mallory"}, m["identities"])
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			d, _ := denylist.New(c, "ctl:deny")
			defer d.Close(context.Background())
			_, err := d.Inspect(ctx(t))
			return err
		}},
		{name: "lease", setup: func(t *testing.T, e *env) ([]string, []string, func(*testing.T, map[string]any)) {
			if !e.hfe {
				return nil, nil, nil
			}
			ls, err := lease.New(e.NewClient(t, nil, matrix.NoCache))
			require.NoError(t, err)
			l, err := ls.TryAcquire(ctx(t), "ctl:leases", "worker-1", 30*time.Second)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return []string{"lease", "inspect", "ctl:leases"}, []string{"ctl:leases"}, func(t *testing.T, m map[string]any) {
				hs := m["holders"].([]any)
				require.Len(t, hs, 1)
				h := hs[0].(map[string]any)
				require.Equal(t, "worker-1", h["field"])
				between(t, h, "remaining_ms", 20*time.Second, 30*time.Second)
			}
		}, inspect: func(t *testing.T, c rueidis.Client) error {
			ls, _ := lease.New(c)
			_, err := ls.Inspect(ctx(t), "ctl:leases")
			return err
		}},
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// testInspectOutput: each primitive seeded through its module; coordctl --json decodes to the
// module's state, and the table form prints without error.
func testInspectOutput(t *testing.T, e *env) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			args, _, check := f.setup(t, e)
			if args == nil {
				r := e.run(t, "lease", "inspect", "ctl:leases")
				require.Equal(t, coordctl.ExitFailure, r.code)
				require.Contains(t, r.err, "lacks hash-field expiry") // Redis 7.0, Valkey 8
				return
			}
			check(t, e.runJSON(t, args...))
			r := e.run(t, args...)
			require.Equal(t, coordctl.ExitOK, r.code, r.err)
			require.Contains(t, r.out, args[2])
			cleanup(t, e, f.name)
		})
	}
}

// cleanup deletes the fixture's keys so the next scenario starts afresh.
func cleanup(t *testing.T, e *env, name string) {
	t.Helper()
	keys := map[string][]string{"lock": {"{ctl:lock}:lease", "{ctl:lock}:fence"},
		"leader": {"{ctl:leader}:lease", "{ctl:leader}:fence"}}[name]
	if keys == nil {
		keys = []string{map[string]string{"rwlock": "ctl:rw", "semaphore": "ctl:sem", "latch": "ctl:latch",
			"counter": "ctl:counter", "idempotency": "ctl:idem", "lease": "ctl:leases", "ratelimit": "ctl:rate",
			"denylist": "ctl:deny"}[name]}
	}
	for _, k := range keys {
		require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Del().Key(k).Build()).Error())
	}
}

// testReadOnly: an inspection (the module's function, and a whole coordctl run) runs only read
// commands, and every key's DUMP and absolute expiry (PEXPIRETIME) are the same before and after.
// The module's own inspection is one EVALSHA.
func testReadOnly(t *testing.T, e *env) {
	for _, f := range fixtures() {
		t.Run(f.name, func(t *testing.T) {
			args, keys, _ := f.setup(t, e)
			if args == nil {
				return
			}
			defer cleanup(t, e, f.name)
			c := e.NewClient(t, nil, matrix.NoCache)
			require.NoError(t, f.inspect(t, c)) // connects and loads the script
			before := e.snapshot(t, keys...)
			s0 := e.CommandStats(t)
			require.NoError(t, f.inspect(t, c))
			s1 := e.CommandStats(t)
			d := e.CommandsBetween(s0, s1)
			for c := range d {
				require.True(t, readCommands[c], "inspection ran %s (all: %v)", c, d)
			}
			require.Equal(t, int64(1), d["evalsha"]+d["evalsha_ro"], "one script per inspection: %v", d)
			t.Logf("%s inspection: %v", f.name, d)
			r := e.run(t, args...)
			require.Equal(t, coordctl.ExitOK, r.code, r.err)
			for c := range e.CommandsSince(t, s1) {
				require.True(t, readCommands[c], "coordctl run ran %s", c)
			}
			require.Equal(t, before, e.snapshot(t, keys...))
		})
	}
}

// testAdmin: each admin action refuses without --yes (exit 2, nothing written) and with it changes
// exactly what it prints.
func testAdmin(t *testing.T, e *env) {
	t.Run("lock_force_release", func(t *testing.T) {
		lk, err := lock.New(e.NewClient(t, nil, matrix.NoCache))
		require.NoError(t, err)
		l, err := lk.TryAcquire(ctx(t), "ctl:adm", 30*time.Second)
		require.NoError(t, err)
		defer l.Close()
		ks, kf := lock.Keys("ctl:adm")
		before := e.snapshot(t, ks, kf)
		r := e.run(t, "lock", "force-release", "ctl:adm")
		require.Equal(t, coordctl.ExitUsage, r.code)
		require.Contains(t, r.err, "--yes")
		require.Equal(t, before, e.snapshot(t, ks, kf))

		m := e.runJSON(t, "lock", "force-release", "ctl:adm", "--yes")
		require.Equal(t, true, m["changed"])
		require.Contains(t, m["what"], "deleted the lease key")
		held, err := l.Verify(ctx(t))
		require.NoError(t, err)
		require.False(t, held) // the evicted holder learns of it at its next check
		require.ErrorIs(t, l.Err(), lock.ErrLost)
		in, err := lk.Inspect(ctx(t), "ctl:adm")
		require.NoError(t, err)
		require.Equal(t, lock.Inspection{FencingToken: l.FencingToken()}, in) // the fence is kept
		l2, err := lk.TryAcquire(ctx(t), "ctl:adm", time.Second)
		require.NoError(t, err)
		require.Greater(t, l2.FencingToken(), l.FencingToken())
		_, err = l2.Release(ctx(t))
		require.NoError(t, err)

		m = e.runJSON(t, "lock", "force-release", "ctl:adm", "--yes")
		require.Equal(t, false, m["changed"])
	})
	t.Run("lease_force_release", func(t *testing.T) {
		if !e.hfe {
			return
		}
		ls, err := lease.New(e.NewClient(t, nil, matrix.NoCache))
		require.NoError(t, err)
		for _, f := range []string{"a", "b"} {
			l, err := ls.TryAcquire(ctx(t), "ctl:adm:leases", f, 30*time.Second)
			require.NoError(t, err)
			defer l.Close()
		}
		m := e.runJSON(t, "lease", "force-release", "ctl:adm:leases", "a", "--yes")
		require.Equal(t, true, m["changed"])
		in, err := ls.Inspect(ctx(t), "ctl:adm:leases")
		require.NoError(t, err)
		require.Len(t, in.Holders, 1)
		require.Equal(t, "b", in.Holders[0].Field)
	})
	t.Run("latch_delete", func(t *testing.T) {
		ls, err := latch.New(e.NewClient(t, nil, matrix.NoCache))
		require.NoError(t, err)
		l, err := ls.Create(ctx(t), "ctl:adm:latch", 2)
		require.NoError(t, err)
		require.NoError(t, l.Abort(ctx(t), "stuck"))
		stale, err := ls.ForceDelete(ctx(t), "ctl:adm:latch", l.Generation()+"x") // another generation
		require.NoError(t, err)
		require.False(t, stale)
		require.Equal(t, coordctl.ExitUsage, e.run(t, "latch", "delete", "ctl:adm:latch").code)
		m := e.runJSON(t, "latch", "delete", "ctl:adm:latch", "--yes")
		require.Equal(t, true, m["changed"])
		require.Contains(t, m["what"], l.Generation())
		in, err := ls.Inspect(ctx(t), "ctl:adm:latch")
		require.NoError(t, err)
		require.False(t, in.Exists)
	})
	t.Run("denylist_deny_allow", func(t *testing.T) {
		d, err := denylist.New(e.NewClient(t, nil, matrix.NoCache), "ctl:adm:deny", denylist.WithCacheDuration(0))
		require.NoError(t, err)
		defer d.Close(context.Background())
		require.Equal(t, coordctl.ExitUsage, e.run(t, "denylist", "deny", "ctl:adm:deny", "mallory").code)
		denied, err := d.IsDenied(ctx(t), "mallory")
		require.NoError(t, err)
		require.False(t, denied)
		m := e.runJSON(t, "denylist", "deny", "ctl:adm:deny", "mallory", "--yes")
		require.Equal(t, true, m["changed"])
		denied, err = d.IsDenied(ctx(t), "mallory")
		require.NoError(t, err)
		require.True(t, denied)
		m = e.runJSON(t, "denylist", "deny", "ctl:adm:deny", "mallory", "--yes")
		require.Equal(t, false, m["changed"])
		m = e.runJSON(t, "denylist", "allow", "ctl:adm:deny", "mallory", "--yes")
		require.Equal(t, true, m["changed"])
		denied, err = d.IsDenied(ctx(t), "mallory")
		require.NoError(t, err)
		require.False(t, denied)
	})
	t.Run("ratelimit_reset", func(t *testing.T) {
		k, err := ratelimit.NewKeyed(e.NewClient(t, nil, matrix.NoCache), ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
		require.NoError(t, err)
		defer k.Close(context.Background())
		_, err = k.AllowN(ctx(t), "ctl:adm:rate", 4)
		require.NoError(t, err)
		before := e.snapshot(t, "ctl:adm:rate")
		require.Equal(t, coordctl.ExitUsage, e.run(t, "ratelimit", "reset", "ctl:adm:rate", "--policy", "fixed:10/1m").code)
		require.Equal(t, before, e.snapshot(t, "ctl:adm:rate"))
		m := e.runJSON(t, "ratelimit", "reset", "ctl:adm:rate", "--policy", "fixed:10/1m", "--yes")
		require.Equal(t, true, m["changed"])
		require.Contains(t, m["what"], "6 of 10 remaining")
		in, err := k.Inspect(ctx(t), "ctl:adm:rate")
		require.NoError(t, err)
		require.Equal(t, int64(10), in.Remaining)
		require.Equal(t, snapshot{"ctl:adm:rate": {"<absent>", time.UnixMilli(-2).String()}}, e.snapshot(t, "ctl:adm:rate"))
	})
	t.Run("idempotency_abandon", func(t *testing.T) {
		s, err := idempotency.New(e.NewClient(t, nil, matrix.NoCache))
		require.NoError(t, err)
		a, err := s.TryBegin(ctx(t), "ctl:adm:idem", time.Minute, idempotency.Fingerprint{})
		require.NoError(t, err)
		m := e.runJSON(t, "idempotency", "abandon", "ctl:adm:idem", "--yes")
		require.Equal(t, true, m["changed"])
		ok, err := s.Complete(ctx(t), "ctl:adm:idem", a.OwnerToken, []byte("late"), time.Minute)
		require.NoError(t, err)
		require.False(t, ok) // the stuck owner can no longer complete
		// A completed result is never removed.
		b, err := s.TryBegin(ctx(t), "ctl:adm:idem", time.Minute, idempotency.Fingerprint{})
		require.NoError(t, err)
		ok, err = s.Complete(ctx(t), "ctl:adm:idem", b.OwnerToken, []byte("done"), time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		before := e.snapshot(t, "ctl:adm:idem")
		r := e.run(t, "idempotency", "abandon", "ctl:adm:idem", "--yes")
		require.Equal(t, coordctl.ExitFailure, r.code)
		require.Contains(t, r.err, "completed")
		require.Equal(t, before, e.snapshot(t, "ctl:adm:idem"))
		// The module's function alone never removes a result, nor a claim of another generation.
		for _, gen := range []int64{b.Generation, b.Generation + 1} {
			ok, err = s.ForceAbandon(ctx(t), "ctl:adm:idem", gen)
			require.NoError(t, err)
			require.False(t, ok)
		}
		require.Equal(t, before, e.snapshot(t, "ctl:adm:idem"))
	})
}

// testBadInput: usage errors exit 2 before any I/O, a key of another type and an unreachable server
// exit 1 with a clear message, and nothing is written in any case.
func testBadInput(t *testing.T, e *env) {
	for _, k := range []string{"ctl:bad:string", "ctl:bad:list", "{ctl:bad}:lease"} {
		_ = e.Raw.Do(ctx(t), e.Raw.B().Del().Key(k).Build())
	}
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Set().Key("ctl:bad:string").Value("x").Build()).Error())
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Rpush().Key("ctl:bad:list").Element("x").Build()).Error())
	require.NoError(t, e.Raw.Do(ctx(t), e.Raw.B().Rpush().Key("{ctl:bad}:lease").Element("x").Build()).Error())
	before := e.snapshot(t, "ctl:bad:string", "ctl:bad:list", "{ctl:bad}:lease")
	s0 := e.CommandStats(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown primitive", []string{"mutex", "inspect", "x"}, coordctl.ExitUsage, "unknown command"},
		{"unknown subcommand", []string{"lock", "peek", "x"}, coordctl.ExitUsage, "peek"},
		{"missing key", []string{"counter", "inspect"}, coordctl.ExitUsage, "needs 1 argument"},
		{"empty key", []string{"counter", "inspect", ""}, coordctl.ExitUsage, "empty"},
		{"unknown flag", []string{"--nope", "counter", "inspect", "x"}, coordctl.ExitUsage, "unknown flag"},
		{"admin without --yes", []string{"latch", "delete", "ctl:bad:list"}, coordctl.ExitUsage, "--yes"},
		{"watch unknown primitive", []string{"watch", "mutex", "x"}, coordctl.ExitUsage, "unknown primitive"},
		{"lock wrong type", []string{"lock", "inspect", "ctl:bad"}, coordctl.ExitFailure, "did not write"},
		{"leader wrong type", []string{"leader", "inspect", "ctl:bad"}, coordctl.ExitFailure, "did not write"},
		{"lock force-release wrong type", []string{"lock", "force-release", "ctl:bad", "--yes"}, coordctl.ExitFailure, "did not write"},
		{"counter wrong type", []string{"counter", "inspect", "ctl:bad:list"}, coordctl.ExitFailure, "does not hold a decimal int64"},
		{"counter not a number", []string{"counter", "inspect", "ctl:bad:string"}, coordctl.ExitFailure, "does not hold a decimal int64"},
		{"rwlock wrong type", []string{"rwlock", "inspect", "ctl:bad:string"}, coordctl.ExitFailure, "did not write"},
		{"semaphore wrong type", []string{"semaphore", "inspect", "ctl:bad:list"}, coordctl.ExitFailure, "did not write"},
		{"latch wrong type", []string{"latch", "inspect", "ctl:bad:string"}, coordctl.ExitFailure, "did not write"},
		{"idempotency wrong type", []string{"idempotency", "inspect", "ctl:bad:list"}, coordctl.ExitFailure, "did not write"},
		{"latch delete wrong type", []string{"latch", "delete", "ctl:bad:list", "--yes"}, coordctl.ExitFailure, "did not write"},
		{"idempotency abandon wrong type", []string{"idempotency", "abandon", "ctl:bad:string", "--yes"}, coordctl.ExitFailure, "did not write"},
		{"ratelimit wrong type", []string{"ratelimit", "inspect", "ctl:bad:list", "--policy", "fixed:10/1m"}, coordctl.ExitFailure, "ratelimit"},
		{"denylist wrong type", []string{"denylist", "inspect", "ctl:bad:string"}, coordctl.ExitFailure, "did not write"},
		{"absent key is a result", []string{"semaphore", "inspect", "ctl:bad:absent"}, coordctl.ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.run(t, tc.args...)
			require.Equal(t, tc.code, r.code, "stdout %q stderr %q", r.out, r.err)
			require.Contains(t, r.err, tc.msg)
			require.NotContains(t, r.err, "\n\n")
		})
	}
	t.Run("unreachable server", func(t *testing.T) {
		r := runArgs(t, "--url", "redis://user:s3cret@127.0.0.1:1", "--timeout", "1s", "lock", "inspect", "x")
		require.Equal(t, coordctl.ExitFailure, r.code)
		require.Contains(t, r.err, "cannot connect to 127.0.0.1:1")
		require.NotContains(t, r.err+r.out, "s3cret")
	})
	t.Run("bad url", func(t *testing.T) {
		r := runArgs(t, "--url", "redis://user:s3cret@127.0.0.1:x", "lock", "inspect", "x")
		require.Equal(t, coordctl.ExitUsage, r.code)
		require.NotContains(t, r.err+r.out, "s3cret")
	})
	for c := range e.CommandsSince(t, s0) {
		require.True(t, readCommands[c], "bad input ran %s", c)
	}
	require.Equal(t, before, e.snapshot(t, "ctl:bad:string", "ctl:bad:list", "{ctl:bad}:lease"))
	if !e.IsCluster() {
		r := runArgs(t, "--url", e.url, "--cluster", "counter", "inspect", "x")
		require.Equal(t, coordctl.ExitFailure, r.code)
		require.Contains(t, r.err, "not a Cluster")
	}
}

// testWatch: watch refreshes an inspection --count times and follows a change between refreshes.
func testWatch(t *testing.T, e *env) {
	s, err := counter.New(e.NewClient(t, nil, matrix.NoCache))
	require.NoError(t, err)
	defer s.Close(context.Background())
	_, err = s.IncrementWithExpire(ctx(t), "ctl:watch", 1, 0)
	require.NoError(t, err)
	r := e.run(t, "--json", "watch", "--interval", "50ms", "--count", "3", "counter", "ctl:watch")
	require.Equal(t, coordctl.ExitOK, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 3)
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		require.Equal(t, int64(1), num(t, m, "value"))
		require.Equal(t, int64(-1), num(t, m, "remaining_ms"))
	}
	// Ends when ctx ends (as on SIGINT), with exit 0.
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	var out, errb strings.Builder
	code := coordctl.Run(c, []string{"--url", e.url, "watch", "--interval", "50ms", "counter", "ctl:watch"}, &out, &errb)
	require.Equal(t, coordctl.ExitOK, code, errb.String())
	require.Contains(t, out.String(), "--- ")
}
