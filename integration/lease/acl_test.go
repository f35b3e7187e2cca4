package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
)

// leaseACL is the example ACL line of lease's README, verbatim: the test runs with exactly its
// commands.
const leaseACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +command|info +pttl +hpttl +hset +hpexpire +hget +hdel +hkeys +type +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// testLeastPrivilege runs every lease operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (no field left without expiry; DUMP and expiry of every key unchanged). Lease runs only
// where hash fields expire (Redis 8, Valkey 9).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../lease/README.md", leaseACL)
	e.LeastPrivilege(t, "acl-lease", "acl:lease:*", rules, cmds, func(t *testing.T, r *matrix.ACLRun) {
		ls, err := lease.New(r.Client, lease.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		var a, b *lease.Lease
		_ = r.Step("try_acquire", func(ctx context.Context) error {
			var err error
			a, err = ls.TryAcquire(ctx, "pool", "a", time.Minute)
			return err
		}) && r.Step("acquire", func(ctx context.Context) error {
			var err error
			b, err = ls.Acquire(ctx, "pool", "b", time.Minute)
			return err
		}) && r.Step("extend", func(ctx context.Context) error {
			_, err := a.Extend(ctx)
			return err
		}) && r.Step("extend_ttl", func(ctx context.Context) error {
			_, err := a.ExtendTTL(ctx, 2*time.Minute)
			return err
		}) && r.Step("verify", func(ctx context.Context) error {
			_, err := a.Verify(ctx)
			return err
		}) && r.Step("holders", func(ctx context.Context) error {
			_, err := ls.Inspect(ctx, "pool")
			return err
		}) && r.Step("release", func(ctx context.Context) error {
			_, err := a.Release(ctx)
			return err
		}) && r.Step("force_release", func(ctx context.Context) error {
			_, err := ls.ForceRelease(ctx, "pool", "b")
			return err
		}) && r.Step("release_after_force", func(ctx context.Context) error {
			_, err := b.Release(ctx)
			return err
		})
	})
}
