package counter_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// counterACL is the ACL documented in counter's README (besides the client's own needs).
var counterCommands = []string{"evalsha", "eval", "incrby", "decrby", "get", "pexpire", "pttl", "mget", "type", "evalsha_ro", "eval_ro"}

func aclRules(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "+" + c
	}
	return out
}

// testLeastPrivilege runs every Store operation as a user with exactly the documented ACL, then as
// users lacking one command each: the operation needing it fails with ErrNoPermission and writes
// nothing.
func testLeastPrivilege(t *testing.T, e *env) {
	e.LeastPrivilege(t, "acl-counter", "acl:counter:*", aclRules(counterCommands), counterCommands,
		func(t *testing.T, r *matrix.ACLRun) {
			s, err := counter.New(r.Client)
			require.NoError(t, err)
			defer func() { _ = s.Close(context.Background()) }()
			k := r.Prefix + "{c}a"
			k2 := r.Prefix + "{c}b"
			_ = r.Step("increment", func(ctx context.Context) error {
				_, err := s.IncrementWithExpire(ctx, k, 5, 0)
				return err
			}) && r.Step("increment_with_expire", func(ctx context.Context) error {
				_, err := s.IncrementWithExpire(ctx, k, 1, time.Minute)
				return err
			}) && r.Step("increment_up_to", func(ctx context.Context) error {
				_, err := s.IncrementUpTo(ctx, k2, 1, 10, time.Minute)
				return err
			}) && r.Step("decrement_down_to", func(ctx context.Context) error {
				_, err := s.DecrementDownTo(ctx, k, 1, 0)
				return err
			}) && r.Step("get", func(ctx context.Context) error {
				_, err := s.Get(ctx, k)
				return err
			}) && r.Step("get_many", func(ctx context.Context) error {
				_, err := s.GetMany(ctx, []string{k, k2})
				return err
			}) && r.Step("batch", func(ctx context.Context) error {
				_, err := s.BatchIncrement(ctx, []counter.Increment{{Key: k, Delta: 1}})
				return err
			}) && r.Step("inspect", func(ctx context.Context) error {
				_, err := s.Inspect(ctx, k)
				return err
			})
		})
}
