package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// ratelimitACL is the example ACL line of ratelimit's README, verbatim: the test runs with exactly its
// commands.
const ratelimitACL = "ACL SETUSER app on >secret resetchannels ~app:* +evalsha +eval +evalsha_ro +eval_ro +time +type +get +set +del +pttl +hgetall +hget +hset +hdel +pexpireat +sadd +srem +sismember +smembers +hello +ping +client|setinfo +client|tracking +client|caching +multi +exec"

// aclScenarios returns the scenarios of this file.
func aclScenarios() []scenario {
	return []scenario{
		{Name: "90_least_privilege_acl", Run: testLeastPrivilege},
		{Name: "91_refused_migration_keeps_limiter", Run: testRefusedMigration},
	}
}

// aclUpdated is each layout of engPolicies with larger limits: the target of the migrations.
var aclUpdated = map[string]ratelimit.Policy{
	"fixed":   ratelimit.FixedWindow{Limit: 200, Window: time.Hour},
	"sliding": ratelimit.SlidingWindow{Limit: 200, Window: time.Hour, Segments: 10},
	"bucket":  ratelimit.TokenBucket{Limit: 200, TokensPerPeriod: 1, Period: time.Hour},
	"gcra":    ratelimit.GCRA{Burst: 200, EmissionInterval: time.Second},
	"composite": ratelimit.Composite{Components: []ratelimit.Component{
		ratelimit.TokenBucket{Limit: 200, TokensPerPeriod: 1, Period: time.Hour},
		ratelimit.SlidingWindow{Limit: 200, Window: time.Hour, Segments: 10},
		ratelimit.FixedWindow{Limit: 200, Window: time.Hour},
	}},
}

// testLeastPrivilege runs the operations of every policy layout (Limiter and Keyed: decisions,
// Inspect, Refund, Reset, Update by migration) and of the deny list as a user with exactly the
// documented ACL, then as users lacking one command each: the operation needing it fails with
// ErrNoPermission and writes nothing (DUMP and expiry of every key unchanged).
func testLeastPrivilege(t *testing.T, e *env) {
	rules, cmds, _ := matrix.DocumentedACL(t, "../../ratelimit/README.md", ratelimitACL)
	names := []string{"fixed", "sliding", "bucket", "gcra", "composite"}
	e.LeastPrivilege(t, "acl-rl", "acl:rl:*", rules, cmds, func(t *testing.T, r *matrix.ACLRun) {
		ok := true
		for _, name := range names {
			p, next := engPolicies[name], aclUpdated[name]
			refundable := name != "sliding" && name != "composite" // a sliding window has no refund
			l, err := ratelimit.New(r.Client, name, p, ratelimit.WithKeyPrefix(r.Prefix))
			require.NoError(t, err)
			k, err := ratelimit.NewKeyed(r.Client, p, ratelimit.WithKeyPrefix(r.Prefix+"keyed:"))
			require.NoError(t, err)
			ok = ok && r.Step(name+"_allow", func(ctx context.Context) error {
				_, err := l.Allow(ctx)
				return err
			}) && r.Step(name+"_allow_n", func(ctx context.Context) error {
				_, err := l.AllowN(ctx, 3)
				return err
			}) && r.Step(name+"_wait", func(ctx context.Context) error {
				_, err := l.Wait(ctx)
				return err
			}) && r.Step(name+"_inspect", func(ctx context.Context) error {
				_, err := l.Inspect(ctx)
				return err
			}) && r.Step(name+"_refund", func(ctx context.Context) error {
				if !refundable {
					return nil
				}
				return l.Refund(ctx, 1)
			}) && r.Step(name+"_update_migrate", func(ctx context.Context) error {
				return l.Update(ctx, next, ratelimit.Migrate)
			}) && r.Step(name+"_reset", func(ctx context.Context) error {
				return l.Reset(ctx)
			}) && r.Step(name+"_keyed_allow", func(ctx context.Context) error {
				_, err := k.Allow(ctx, "u1")
				return err
			}) && r.Step(name+"_keyed_inspect", func(ctx context.Context) error {
				_, err := k.Inspect(ctx, "u1")
				return err
			}) && r.Step(name+"_keyed_refund", func(ctx context.Context) error {
				if !refundable {
					return nil
				}
				return k.Refund(ctx, "u1", 1)
			}) && r.Step(name+"_keyed_update_migrate", func(ctx context.Context) error {
				return k.SetPolicy(ctx, next)
			}) && r.Step(name+"_keyed_allow_after_update", func(ctx context.Context) error {
				_, err := k.Allow(ctx, "u1")
				return err
			}) && r.Step(name+"_keyed_reset", func(ctx context.Context) error {
				return k.Reset(ctx, "u1")
			})
			_ = l.Close(context.Background())
			_ = k.Close(context.Background())
		}
		if !ok {
			return
		}
		d, err := denylist.New(r.Client, "deny", denylist.WithKeyPrefix(r.Prefix))
		require.NoError(t, err)
		defer func() { _ = d.Close(context.Background()) }()
		_ = r.Step("deny_set", func(ctx context.Context) error {
			return d.SetDenied(ctx, "bad", true)
		}) && r.Step("deny_is_denied", func(ctx context.Context) error {
			_, err := d.IsDenied(ctx, "bad")
			return err
		}) && r.Step("deny_entries", func(ctx context.Context) error {
			_, err := d.Inspect(ctx)
			return err
		}) && r.Step("deny_unset", func(ctx context.Context) error {
			return d.SetDenied(ctx, "bad", false)
		})
	})
}

// testRefusedMigration: an Update(Migrate) the ACL refuses (NOPERM: the script never ran, nothing was
// written) returns ErrNoPermission and keeps the limiter open on its old settings, as the script's own
// rejections before writing do; only a failure that may have left migrated state closes it. Before,
// any failure but those rejections closed the limiter and failed its later calls with ErrClosed.
func testRefusedMigration(t *testing.T, e *env) {
	rules, _, _ := matrix.DocumentedACL(t, "../../ratelimit/README.md", ratelimitACL)
	full := append(append([]string{"~acl:mig:*"}, matrix.ClientACL...), rules...)
	const user = "acl-mig"
	c, err := rueidis.NewClient(e.ACLUser(t, user, full...))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	old := ratelimit.FixedWindow{Limit: 5, Window: time.Hour}
	l, err := ratelimit.New(c, "k", old, ratelimit.WithKeyPrefix("acl:mig:"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	res, err := l.AllowN(ctx(t), 2)
	require.NoError(t, err)
	require.True(t, res.Allowed)
	before := e.Snapshot(t, "acl:mig:*")

	e.ACLUser(t, user, matrix.Without(matrix.Without(full, "evalsha"), "eval")...) // no script runs
	err = l.Update(ctx(t), ratelimit.FixedWindow{Limit: 50, Window: time.Hour}, ratelimit.Migrate)
	require.ErrorIs(t, err, ratelimit.ErrNoPermission)
	require.NotErrorIs(t, err, ratelimit.ErrClosed)
	e.ACLUser(t, user, full...)

	require.Equal(t, before, e.Snapshot(t, "acl:mig:*"), "a refused migration writes nothing")
	require.Equal(t, old, l.Policy(), "the old settings stay")
	res, err = l.AllowN(ctx(t), 3)
	require.NoError(t, err, "the limiter stays open")
	require.True(t, res.Allowed)
	res, err = l.Allow(ctx(t))
	require.NoError(t, err)
	require.False(t, res.Allowed, "5 of 5 used under the old settings")
}
