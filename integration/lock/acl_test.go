package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lock"
)

// lockCommands is the command set lock's README documents.
var lockCommands = []string{"evalsha", "eval", "evalsha_ro", "eval_ro", "get", "set", "incr", "type", "pttl", "pexpire", "del"}

// testLeastPrivilege runs every lock operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (the keyspace is unchanged, DUMP and expiry of every key).
func testLeastPrivilege(t *testing.T, e *env) {
	rules := make([]string, len(lockCommands))
	for i, c := range lockCommands {
		rules[i] = "+" + c
	}
	e.LeastPrivilege(t, "acl-lock", "acl:lock:*", rules, lockCommands, func(t *testing.T, r *matrix.ACLRun) {
		l, err := lock.New(r.Client, lock.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		var held *lock.Lease
		_ = r.Step("try_acquire", func(ctx context.Context) error {
			var err error
			held, err = l.TryAcquire(ctx, "job", time.Minute)
			return err
		}) && r.Step("extend", func(ctx context.Context) error {
			_, err := held.Extend(ctx)
			return err
		}) && r.Step("verify", func(ctx context.Context) error {
			_, err := held.Verify(ctx)
			return err
		}) && r.Step("inspect", func(ctx context.Context) error {
			_, err := l.Inspect(ctx, "job")
			return err
		}) && r.Step("release", func(ctx context.Context) error {
			_, err := held.Release(ctx)
			return err
		}) && r.Step("acquire_again", func(ctx context.Context) error {
			var err error
			held, err = l.Acquire(ctx, "job", time.Minute)
			return err
		}) && r.Step("force_release", func(ctx context.Context) error {
			_, err := l.ForceRelease(ctx, "job")
			return err
		})
	})
}
