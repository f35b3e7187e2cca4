package idempotency

import (
	"context"
	"strconv"

	"github.com/coordkit/coordkit/luakit"
)

var forceAbandonScript = luakit.MustLoad(scriptFS, "force_abandon")

// ForceAbandon removes the pending claim at key when it still has generation (as [Store.Inspect]
// reported it), whoever owns it: an operator's action for a claim whose owner is stuck or gone and
// whose lease is too long to wait out. It reports whether a claim was removed; false means the key is
// absent, completed (a stored result is never removed) or holds another generation, and nothing was
// written. The owner is not told: its Complete, Extend and Abandon then return false, and a retry of
// the request can claim the key at once. The same caution as for [Store.Abandon] applies: do it only
// when running the work again is safe.
//
// It fails before any I/O with an error matching luakit.ErrInvalidConfig for an empty key or a
// generation below 1; with one wrapping [ErrForeignData] when the key holds another Redis type (left
// alone); with one wrapping [ErrUncertain] when the reply was lost (the claim may or may not be gone).
// It blocks for one round trip (one script), bounded by ctx. Safe for concurrent use.
func (s *Store) ForceAbandon(ctx context.Context, key string, generation int64) (bool, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opForceAbandon))
	if err != nil {
		return false, err
	}
	v, err := s.forceAbandon(ctx, key, generation)
	sc.End(err)
	return v, err
}

// forceAbandon is [Store.ForceAbandon], run inside its hook scope.
func (s *Store) forceAbandon(ctx context.Context, key string, generation int64) (ok bool, err error) {
	if err := validateKey(key); err != nil {
		return false, err
	}
	if generation < 1 {
		return false, luakit.InvalidConfig("idempotency", "generation must be at least 1")
	}
	n, err := forceAbandonScript.Exec(ctx, s.client, []string{s.cfg.keys.Key(key)},
		[]string{strconv.FormatInt(generation, 10)}).AsInt64()
	if err != nil {
		return false, wrap("force abandon", err)
	}
	return owned("force abandon", n)
}
