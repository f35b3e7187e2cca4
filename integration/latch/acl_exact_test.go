package latch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
)

// latchACL is the example ACL line of latch's README, verbatim: the test runs with exactly its
// commands and its channel pattern (the run's key pattern).
const latchACL = "ACL SETUSER app on >secret resetchannels ~app:* &app:* +evalsha +eval +type +hmget +hset +hget +hincrby +del +pexpire +time +spublish +ssubscribe +sunsubscribe +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// testLeastPrivilege runs every latch operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (DUMP and expiry of every key unchanged).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, chans := matrix.DocumentedACL(t, "../../latch/README.md", latchACL)
	require.True(t, chans, "latch's ACL grants its channels")
	const keys = "acl:latch:*"
	rules = append(rules, "&"+keys)
	// SUNSUBSCRIBE drops a Wait's subscription after Wait has returned: no operation's result
	// depends on it, so it is in the exact run but not dropped one by one.
	drop := slices.DeleteFunc(slices.Clone(cmds), func(c string) bool { return c == "sunsubscribe" })
	require.Len(t, drop, len(cmds)-1)
	e.LeastPrivilege(t, "acl-latch", keys, rules, drop, func(t *testing.T, r *matrix.ACLRun) {
		ls, err := latch.New(r.Client, latch.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		var l, j *latch.Latch
		var gen string
		_ = r.Step("create", func(ctx context.Context) error {
			var err error
			l, err = ls.Create(ctx, "a", 2, latch.WithExpiry(time.Minute))
			return err
		}) && r.Step("join", func(ctx context.Context) error {
			var err error
			j, err = ls.Join(ctx, "a")
			return err
		}) && r.Step("count", func(ctx context.Context) error {
			_, err := j.Count(ctx)
			return err
		}) && r.Step("count_down", func(ctx context.Context) error {
			_, err := l.CountDown(ctx)
			return err
		}) && r.Step("wait", func(ctx context.Context) error {
			// Wait subscribes (the latch is still open); the last CountDown is sent once the
			// subscription is on the server, so Wait returns through its channel.
			done := make(chan error, 1)
			go func() { done <- j.Wait(ctx) }()
			for {
				select {
				case err := <-done:
					return err // refused before subscribing (nothing was counted down)
				case <-time.After(10 * time.Millisecond):
				}
				if e.shardSubscribers(t, r.Prefix+"a") > 0 {
					break
				}
			}
			if _, err := l.CountDown(ctx); err != nil {
				<-done
				return err
			}
			return <-done
		}) && r.Step("inspect", func(ctx context.Context) error {
			_, err := ls.Inspect(ctx, "a")
			return err
		}) && r.Step("reset_with_expiry", func(ctx context.Context) error {
			var err error
			l, err = ls.Reset(ctx, "a", 1, latch.WithExpiry(time.Minute))
			return err
		}) && r.Step("abort", func(ctx context.Context) error {
			return l.Abort(ctx, "stop")
		}) && r.Step("delete", func(ctx context.Context) error {
			_, err := l.Delete(ctx)
			return err
		}) && r.Step("create_no_expiry", func(ctx context.Context) error {
			var err error
			l, err = ls.Create(ctx, "b", 1)
			return err
		}) && r.Step("reset", func(ctx context.Context) error {
			var err error
			l, err = ls.Reset(ctx, "b", 3)
			gen = l.Generation()
			return err
		}) && r.Step("force_delete", func(ctx context.Context) error {
			_, err := ls.ForceDelete(ctx, "b", gen)
			return err
		})
	})
}
