package ratelimit

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// The conditions every Coordkit module shares are luakit's values (ratelimit.ErrUncertain ==
// luakit.ErrUncertain), so one errors.Is check works whichever module returned the error. The
// comments say what each means here. They are returned wrapped, with a "ratelimit: " prefix and
// detail.
var (
	ErrNoPermission  = luakit.ErrNoPermission  // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrInvalidConfig = luakit.ErrInvalidConfig // a bad option or argument, before any I/O: matched by every option error, an empty key, ErrInvalidPolicy, ErrInvalidUpdate, ErrNegativePermits and ErrEmptyIdentity
	ErrForeignData   = luakit.ErrForeignData   // the limiter's or the deny list's key holds another Redis type or another limiter's layout; nothing was written
	ErrUncertain     = luakit.ErrUncertain     // a script may have run but no reply was read: permits may have been consumed, a deny-list write or a migration may have happened
	ErrClosed        = luakit.ErrClosed        // a call after Close (or after a failed migration closed the limiter), and requests waiting in a queue or on a shared deny-list read when it closes
	ErrNilClient     = luakit.ErrNilClient     // New or NewKeyed given a nil rueidis.Client
)

// The package's own argument errors (luakit.ConfigSentinel values). Each is returned, before any
// I/O, wrapped with detail, and also matches [ErrInvalidConfig] (errors.Is(err, ErrInvalidPolicy)
// and errors.Is(err, ErrInvalidConfig) both hold).
var (
	// ErrInvalidPolicy is returned by [New], [NewKeyed] and [Limiter.Update] for settings out of
	// range (the message names the field).
	ErrInvalidPolicy = luakit.ConfigSentinel("ratelimit: invalid policy")

	// ErrInvalidUpdate is returned by [Limiter.Update] when the new policy changes the algorithm (or,
	// for a composite, the number or algorithm of a component), or for an [UpdateMode] other than
	// [Migrate] and [Adopt] (the zero value included). Nothing changed.
	ErrInvalidUpdate = luakit.ConfigSentinel("ratelimit: invalid update")

	// ErrNegativePermits is returned for n < 0.
	ErrNegativePermits = luakit.ConfigSentinel("ratelimit: negative permit count")

	// ErrEmptyIdentity is returned for an empty deny-list identity (given to [WithDenyList], or
	// returned by a [WithKeyedDenyList] function). It is denylist.ErrEmptyIdentity.
	ErrEmptyIdentity = denylist.ErrEmptyIdentity
)

// The package's own errors found by the server. Nothing was written when they are returned.
var (
	// ErrConfigMismatch is returned when a composite's stored configuration signature differs from this
	// limiter's: another process uses other settings for the key. Nothing was consumed.
	ErrConfigMismatch = errors.New("ratelimit: stored composite configuration differs")

	// ErrDebtOverflow is returned by a GCRA migration whose rescaled debt would exceed [MaxSpan].
	// Nothing was written and the limiter keeps its old settings.
	ErrDebtOverflow = errors.New("ratelimit: migrated GCRA debt out of range")
)

// errEmptyKey is the error for an empty limiter key: it matches luakit.ErrEmptyKey and
// ErrInvalidConfig.
var errEmptyKey = fmt.Errorf("ratelimit: %w", luakit.ValidateKey("rate limit key", ""))
