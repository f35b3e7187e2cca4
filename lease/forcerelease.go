package lease

import (
	"context"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
)

var forceReleaseScript = luakit.MustLoad(scriptFS, "force_release")

// ForceRelease deletes the named lease field of the hash at hashKey (the key prefix applies) whoever
// holds it: an operator's action for a lease whose holder is stuck. It reports whether a lease was
// deleted; false means the field was absent and nothing was written. Other fields are untouched. The
// evicted holder is not told: it learns of the loss at its next renewal or verification ([ErrLost]),
// and may keep working until then.
//
// It fails before any I/O with an error matching [ErrInvalidConfig] for an empty hash key and with
// [ErrEmptyField] for an empty field; with an error wrapping luakit.ErrForeignData when the key holds
// another Redis type (left alone); with one wrapping [ErrUncertain] when the reply was lost (the lease
// may or may not be gone). It needs no hash-field expiry on the server (HDEL only). It blocks for one
// round trip (one script), bounded by ctx. Safe for concurrent use.
func (ls *Leases) ForceRelease(ctx context.Context, hashKey, field string) (bool, error) {
	ctx, sc, err := ls.cfg.own.Begin(ctx, "FORCE RELEASE")
	if err != nil {
		return false, err
	}
	v, err := ls.forceRelease(ctx, hashKey, field)
	sc.End(err)
	return v, err
}

// forceRelease is [Leases.ForceRelease], run inside its hook scope.
func (ls *Leases) forceRelease(ctx context.Context, hashKey, field string) (_ bool, err error) {
	if err = luakit.ValidateKey("hash key", hashKey); err != nil {
		return false, fmt.Errorf("lease: %w", err)
	}
	if field == "" {
		return false, ErrEmptyField
	}
	n, err := forceReleaseScript.Exec(ctx, ls.client, []string{ls.cfg.keys.Key(hashKey)}, []string{field}).AsInt64()
	if err != nil {
		if luakit.IsUncertain(err) {
			return false, fmt.Errorf("lease: force release: %w: %w", ErrUncertain, err)
		}
		return false, fmt.Errorf("lease: force release: %w", luakit.MarkForeign(err))
	}
	if n == luakit.StatusForeign {
		return false, fmt.Errorf("lease: force release: %w (the key holds another Redis type)", luakit.ErrForeignData)
	}
	return n == luakit.StatusOK, nil
}
