package leader_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// leaderACL is the example ACL line of leader's README, verbatim: the tests run with exactly its
// commands.
const leaderACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +get +set +incr +type +pttl +pexpire +del +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// TestLeaderACL runs leader's least-privilege scenarios on every target of the matrix.
func TestLeaderACL(t *testing.T) {
	matrix.Run(t, matrix.Targets(), func(t *testing.T, mt matrix.Target) {
		e := startEnv(t, mt)
		t.Run("least_privilege_acl", func(t *testing.T) { testLeastPrivilege(t, e) })
		t.Run("renewal_refused_mid_term", func(t *testing.T) { testRenewalRefused(t, e) })
	})
}

// testLeastPrivilege runs every Election operation (a term won and relinquished, Inspect, Start and
// Stop) as a user with exactly the documented ACL, then as users lacking one command each: the
// operation needing it fails with ErrNoPermission and writes nothing.
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../leader/README.md", leaderACL)
	// PEXPIRE (renewal) and DEL (release) run after the term's writes: their refusal is
	// testRenewalRefused's, not a "nothing written" step; the exact run needs them.
	drop := slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return c == "pexpire" || c == "del" })
	require.Len(t, drop, len(cmds)-2)
	e.LeastPrivilege(t, "acl-leader", "acl:leader:*", rules, drop, func(t *testing.T, r *matrix.ACLRun) {
		term := func(ctx context.Context) error {
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			el, err := leader.New(r.Client, "job", leader.WithKeyPrefix(r.Prefix),
				leader.WithLeaseDuration(time.Minute),
				leader.OnElected(func(context.Context, leader.Term) error { cancel(); return nil }))
			require.NoError(t, err)
			return el.Run(rctx)
		}
		el, err := leader.New(r.Client, "job", leader.WithKeyPrefix(r.Prefix), leader.WithLeaseDuration(time.Minute))
		require.NoError(t, err)
		_ = r.Step("run", term) && r.Step("inspect", func(ctx context.Context) error {
			_, err := el.Inspect(ctx)
			return err
		}) && r.Step("start_stop", func(ctx context.Context) error {
			elected := make(chan struct{})
			s, err := leader.New(r.Client, "job", leader.WithKeyPrefix(r.Prefix), leader.WithLeaseDuration(time.Minute),
				leader.OnElected(func(ctx context.Context, _ leader.Term) error {
					close(elected)
					<-ctx.Done()
					return nil
				}))
			require.NoError(t, err)
			if err := s.Start(ctx); err != nil {
				return err
			}
			select {
			case <-elected:
			case <-s.Stopped():
			}
			return s.Stop(ctx)
		})
	})
}

// testRenewalRefused: the leader's user loses PEXPIRE in the middle of a term. The next renewal is
// refused: Run returns an error matching ErrNoPermission at once, after one term (no re-election
// loop), with the lease released. A lock KeepAlive refused the same way ends with ErrNoPermission.
func testRenewalRefused(t *testing.T, e *env) {
	rules, _, _ := matrix.DocumentedACL(t, "../../leader/README.md", leaderACL)
	const user = "acl-leader-renew"
	opt := e.ACLUser(t, user, append(append([]string{"~*"}, matrix.ClientACL...), rules...)...)
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	revoke := func() {
		for _, n := range e.Nodes {
			_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "-pexpire")
			require.NoError(t, err)
		}
	}

	name, leaseKey, _ := election("acl-renew")
	rec := &recorder{}
	// The term revokes the user's PEXPIRE once it observed its first renewal (the lease's PTTL grew),
	// then holds until the term ends.
	work := func(ctx context.Context, _ leader.Term) error {
		first := e.PTTL(t, leaseKey)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Millisecond):
			}
			if p := e.PTTL(t, leaseKey); p > first {
				break
			} else if p > 0 {
				first = min(first, p)
			}
		}
		revoke()
		<-ctx.Done()
		return nil
	}
	cand := newCandidateWith(t, c, nil, 0, name, rec, work)
	rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = cand.el.Run(rctx)
	require.NoError(t, rctx.Err(), "Run ended on its own, not at ctx's end")
	require.ErrorIs(t, err, leader.ErrNoPermission)
	require.True(t, luakit.IsTerminal(err))
	terms := rec.snapshot()
	require.Len(t, terms, 1, "one term, no re-election")
	require.False(t, terms[0].revoked.IsZero(), "OnRevoked ran")
	require.EqualValues(t, -2, e.PTTL(t, leaseKey), "the lease was released")

	// The release refused (DEL, revoked once the term is won: the acquisition checks DEL too, for
	// the lease it deletes when the counter is unusable) at the end of a term: Run returns
	// ErrNoPermission instead of nil, and does not campaign again.
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "+pexpire")
		require.NoError(t, err)
	}
	rec2 := &recorder{}
	name2, _, _ := election("acl-release")
	cand2 := newCandidateWith(t, c, nil, 0, name2, rec2, func(context.Context, leader.Term) error {
		for _, n := range e.Nodes {
			_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "-del")
			require.NoError(t, err)
		}
		return nil
	})
	err = cand2.el.Run(rctx)
	require.NoError(t, rctx.Err(), "Run ended on its own, not at ctx's end")
	require.ErrorIs(t, err, leader.ErrNoPermission)
	require.Len(t, rec2.snapshot(), 1, "one term, no re-election")

	// KeepAlive on a lock lease of the same user (PEXPIRE still refused): the first renewal ends the
	// handle with ErrNoPermission.
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "+pexpire", "+del")
		require.NoError(t, err)
	}
	lk, err := lock.New(c)
	require.NoError(t, err)
	h, err := lk.TryAcquire(ctx(t), "ck:acl:keepalive", 2*time.Second)
	require.NoError(t, err)
	revoke()
	require.NoError(t, h.KeepAlive(ctx(t)))
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("KeepAlive did not end the handle")
	}
	require.ErrorIs(t, h.Err(), luakit.ErrNoPermission)
	require.False(t, errors.Is(h.Err(), context.Canceled))
}
