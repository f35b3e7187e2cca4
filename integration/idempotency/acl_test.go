package idempotency_test

import (
	"context"
	"testing"
	"time"

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
