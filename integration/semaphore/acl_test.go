package semaphore_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/semaphore"
)

// semaphoreACL is the example ACL line of semaphore's README, verbatim: the test runs with exactly its
// commands.
const semaphoreACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +time +type +pttl +zremrangebyscore +zrangebyscore +zscore +zcard +zadd +zrange +zrem +pexpireat +persist +del +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

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
			s, err := semaphore.New(r.Client, "pool", 1, semaphore.WithKeyPrefix(r.Prefix))
			if err != nil {
				return err
			}
			_, err = s.Inspect(ctx)
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

// testRefusedAcquireNoCleanup: an acquisition the ACL refuses wrote nothing (every script checks before
// its first write), so no owner-token cleanup follows it: no second script call (which would prune
// expired permits, a write, for a user who may run the release), no "cleanup not confirmed" warning
// and no abandoned cleanup counted (for a user who may not run it either).
func testRefusedAcquireNoCleanup(t *testing.T, e *env) {
	rules, _, _ := matrix.DocumentedACL(t, "../../semaphore/README.md", semaphoreACL)
	full := append(append([]string{"~acl:semnc:*"}, matrix.ClientACL...), rules...)
	for _, tc := range []struct {
		name string
		drop []string
	}{
		{"release_allowed", []string{"zadd"}},
		{"release_refused_too", []string{"zadd", "zrem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := full
			for _, cmd := range tc.drop {
				rs = matrix.Without(rs, cmd)
			}
			c, err := rueidis.NewClient(e.ACLUser(t, "acl-semnc", rs...))
			require.NoError(t, err)
			t.Cleanup(c.Close)
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			var logs bytes.Buffer
			s := newSem(t, c, "pool-"+tc.name, 2, semaphore.WithKeyPrefix("acl:semnc:"),
				semaphore.WithMeterProvider(mp), semaphore.WithCleanupRetryWindow(200*time.Millisecond),
				semaphore.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			before := e.CommandStats(t)
			_, err = s.TryAcquire(ctx(t), time.Minute)
			require.ErrorIs(t, err, semaphore.ErrNoPermission)
			require.Zero(t, e.CommandsSince(t, before)["zremrangebyscore"], "no cleanup ran the release script")
			require.Empty(t, e.Snapshot(t, "acl:semnc:*"), "nothing written")
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, s.Close(sctx))
			require.Empty(t, abandoned(t, reader), "no cleanup was owed, so none was abandoned")
			require.Empty(t, logs.String(), "no cleanup warning")
		})
	}
}
