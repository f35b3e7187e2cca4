package idempotency_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// idempotencyCommands is the command set idempotency's README documents.
var idempotencyCommands = []string{"evalsha", "eval", "type", "hmget", "hexists", "hstrlen", "time", "hset", "pexpire", "pttl", "hdel", "del"}

// testLeastPrivilege runs every Store operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (no claim without expiry, no stored result with an error).
func testLeastPrivilege(t *testing.T, e *env) {
	rules := make([]string, len(idempotencyCommands))
	for i, c := range idempotencyCommands {
		rules[i] = "+" + c
	}
	// Commands every path checks; HEXISTS and HSTRLEN are checked only by scripts this suite reaches
	// in the exact run, so they are not dropped one by one.
	drop := []string{"evalsha", "eval", "hmget", "time", "hset", "pexpire", "pttl", "hdel", "del"}
	e.LeastPrivilege(t, "acl-idem", "acl:idem:*", rules, drop, func(t *testing.T, r *matrix.ACLRun) {
		s, err := idempotency.New(r.Client, idempotency.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		var a idempotency.Attempt
		fp := idempotency.FingerprintOf("d")
		_ = r.Step("try_begin", func(ctx context.Context) error {
			var err error
			a, err = s.TryBegin(ctx, "k", time.Minute, fp)
			return err
		}) && r.Step("extend", func(ctx context.Context) error {
			_, err := s.Extend(ctx, "k", a.OwnerToken, time.Minute)
			return err
		}) && r.Step("complete", func(ctx context.Context) error {
			_, err := s.Complete(ctx, "k", a.OwnerToken, []byte("ok"), time.Minute)
			return err
		}) && r.Step("begin_replay", func(ctx context.Context) error {
			_, err := s.Begin(ctx, "k", time.Minute, fp)
			return err
		}) && r.Step("inspect", func(ctx context.Context) error {
			_, err := s.Inspect(ctx, "k")
			return err
		}) && r.Step("begin", func(ctx context.Context) error {
			var err error
			a, err = s.Begin(ctx, "k2", time.Minute, fp)
			return err
		}) && r.Step("abandon", func(ctx context.Context) error {
			_, err := s.Abandon(ctx, "k2", a.OwnerToken)
			return err
		}) && r.Step("begin_again", func(ctx context.Context) error {
			var err error
			a, err = s.TryBegin(ctx, "k3", time.Minute, fp)
			return err
		}) && r.Step("force_abandon", func(ctx context.Context) error {
			_, err := s.ForceAbandon(ctx, "k3", a.Generation)
			return err
		})
	})
}

// testClaimNeedsItsLifecycle: a user allowed to claim but not to finish a claim (no HDEL for
// Complete, no DEL for Abandon, no HMGET for the reads Extend, Complete and Abandon begin with) is
// refused at the claim itself: TryBegin fails with ErrNoPermission and writes nothing, and behind the
// middleware the handler never runs (503, the store-failure reply). Without the check the claim was
// made, the handler ran, and Complete was refused: the claim turned retries away until its lease
// ended, and the work then ran again with no result ever stored.
func testClaimNeedsItsLifecycle(t *testing.T, e *env) {
	full := append([]string{"~acl:life:*"}, matrix.ClientACL...)
	for _, c := range idempotencyCommands {
		full = append(full, "+"+c)
	}
	for _, cmd := range []string{"hdel", "del", "hmget"} {
		t.Run("without_"+cmd, func(t *testing.T) {
			opt := e.ACLUser(t, "acl-life", matrix.Without(full, cmd)...)
			c, err := rueidis.NewClient(opt)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			prefix := "acl:life:" + cmd + ":"
			s, err := idempotency.New(c, idempotency.WithKeyPrefix(prefix))
			require.NoError(t, err)

			_, err = s.TryBegin(ctx(t), "k", time.Minute, idempotency.FingerprintOf("d"))
			require.ErrorIs(t, err, idempotency.ErrNoPermission, "TryBegin without %s", cmd)

			var calls atomic.Int32
			srv := server(t, s, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				calls.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			r := send(t, srv, http.MethodPost, "/orders", "key-1", "{}")
			requireReply(t, r, http.StatusServiceUnavailable, false)
			require.Zero(t, calls.Load(), "the handler must not run when its claim could not be finished")
			require.Empty(t, e.Snapshot(t, prefix+"*"), "nothing written")
		})
	}
}

// testKeepAliveRefused: a renewal the server refuses for good ends the keep-alive with that error at
// once. The claim is made as a user with the documented ACL; then PEXPIRE, the renewal's write, is
// taken from the user (an operator revoking a permission while work runs). The first renewal (after
// lease/3) is refused with NOPERM, which no retry can fix: the work's context ends with a cause
// matching ErrNoPermission, long before the lease could end, instead of retrying until ErrExpired.
// The refused renewal wrote nothing: the claim stays pending with its lease running down.
func testKeepAliveRefused(t *testing.T, e *env) {
	const (
		user  = "acl-renew"
		lease = 3 * time.Second
	)
	rules := append([]string{"~acl:renew:*"}, matrix.ClientACL...)
	for _, c := range idempotencyCommands {
		rules = append(rules, "+"+c)
	}
	c, err := rueidis.NewClient(e.ACLUser(t, user, rules...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := idempotency.New(c, idempotency.WithKeyPrefix("acl:renew:"))
	require.NoError(t, err)
	a, err := s.TryBegin(ctx(t), "k", lease, idempotency.FingerprintOf("d"))
	require.NoError(t, err)
	requireState(t, a, idempotency.Started)
	for _, n := range e.Nodes {
		_, err := n.Do(ctx(t), "ACL", "SETUSER", user, "-pexpire")
		require.NoError(t, err)
	}

	work, stop, err := keepAlive(s, ctx(t), "k", a)
	require.NoError(t, err)
	defer stop()
	select {
	case <-work.Done():
	case <-time.After(2 * lease):
		t.Fatal("keep-alive still running after a refused renewal")
	}
	cause := context.Cause(work)
	require.ErrorIs(t, cause, idempotency.ErrNoPermission, "the refusal is the cause")
	require.NotErrorIs(t, cause, idempotency.ErrExpired)
	require.True(t, time.Now().Before(a.Deadline), "ended at the refused renewal, before the lease's estimate (%v)", time.Until(a.Deadline))
	e.requirePending(t, "acl:renew:k", lease)
}
