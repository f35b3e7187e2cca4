package semaphore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/semaphore"
)

// semaphoreACL is the example ACL line of semaphore's README, verbatim: the test runs with exactly its
// commands.
const semaphoreACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +time +type +pttl +zremrangebyscore +zrangebyscore +zscore +zcard +zadd +zrange +zrem +pexpireat +persist +del +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// init registers the scenario before the one that kills the standalone server (it must stay last).
func init() {
	i := slices.IndexFunc(scenarios, func(s scenario) bool { return strings.HasPrefix(s.name, "17_abandoned") })
	if i < 0 {
		i = len(scenarios)
	}
	scenarios = slices.Insert(scenarios, i, scenario{name: "90_least_privilege_acl", run: testLeastPrivilege})
}

// testLeastPrivilege runs every semaphore operation as a user with exactly the documented ACL, then
// as users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing (DUMP and expiry of every key unchanged).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../semaphore/README.md", semaphoreACL)
	e.LeastPrivilege(t, "acl-sem", "acl:sem:*", rules, cmds, func(t *testing.T, r *matrix.ACLRun) {
		s, err := semaphore.New(r.Client, "pool", 2, semaphore.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		defer func() { _ = s.Close(context.Background()) }()
		var p1, p2 *semaphore.Permit
		_ = r.Step("try_acquire", func(ctx context.Context) error {
			var err error
			p1, err = s.TryAcquire(ctx, time.Minute)
			return err
		}) && r.Step("acquire", func(ctx context.Context) error {
			var err error
			p2, err = s.Acquire(ctx, time.Minute)
			return err
		}) && r.Step("extend", func(ctx context.Context) error {
			_, err := p1.Extend(ctx)
			return err
		}) && r.Step("extend_ttl", func(ctx context.Context) error {
			_, err := p1.ExtendTTL(ctx, 2*time.Minute)
			return err
		}) && r.Step("verify", func(ctx context.Context) error {
			_, err := p1.Verify(ctx)
			return err
		}) && r.Step("inspect", func(ctx context.Context) error {
			_, err := semaphore.Inspect(ctx, r.Client, "pool", semaphore.WithKeyPrefix(r.Prefix))
			return err
		}) && r.Step("release", func(ctx context.Context) error {
			_, err := p1.Release(ctx)
			return err
		}) && r.Step("release_last", func(ctx context.Context) error {
			_, err := p2.Release(ctx)
			return err
		})
	})
}
