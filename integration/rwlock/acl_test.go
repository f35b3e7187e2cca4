package rwlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/rwlock"
)

// rwlockACL is the example ACL line of rwlock's README, verbatim: the test runs with exactly its
// commands.
const rwlockACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +time +type +pttl +zremrangebyscore +zrangebyscore +zcard +zrange +zadd +zscore +zrem +pexpire +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// testLeastPrivilege runs every rwlock operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (DUMP and expiry of every key unchanged).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../rwlock/README.md", rwlockACL)
	e.LeastPrivilege(t, "acl-rwlock", "acl:rwlock:*", rules, cmds, func(t *testing.T, r *matrix.ACLRun) {
		l, err := rwlock.New(r.Client, rwlock.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		var rd, rd2, wr *rwlock.Lease
		_ = r.Step("try_acquire_read", func(ctx context.Context) error {
			var err error
			rd, err = l.TryAcquireRead(ctx, "doc", time.Minute)
			return err
		}) && r.Step("acquire_read", func(ctx context.Context) error {
			var err error
			rd2, err = l.AcquireRead(ctx, "doc", time.Minute)
			return err
		}) && r.Step("extend", func(ctx context.Context) error {
			_, err := rd.Extend(ctx)
			return err
		}) && r.Step("extend_ttl", func(ctx context.Context) error {
			_, err := rd.ExtendTTL(ctx, 2*time.Minute)
			return err
		}) && r.Step("verify", func(ctx context.Context) error {
			_, err := rd.Verify(ctx)
			return err
		}) && r.Step("inspect", func(ctx context.Context) error {
			_, err := l.Inspect(ctx, "doc")
			return err
		}) && r.Step("release_read", func(ctx context.Context) error {
			_, err := rd.Release(ctx)
			return err
		}) && r.Step("release_read2", func(ctx context.Context) error {
			_, err := rd2.Release(ctx)
			return err
		}) && r.Step("try_acquire_write", func(ctx context.Context) error {
			var err error
			wr, err = l.TryAcquireWrite(ctx, "doc", time.Minute)
			return err
		}) && r.Step("release_write", func(ctx context.Context) error {
			_, err := wr.Release(ctx)
			return err
		}) && r.Step("acquire_write", func(ctx context.Context) error {
			var err error
			wr, err = l.AcquireWrite(ctx, "doc", time.Minute)
			return err
		}) && r.Step("release_write_again", func(ctx context.Context) error {
			_, err := wr.Release(ctx)
			return err
		})
	})
}
