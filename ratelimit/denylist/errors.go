package denylist

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// The conditions every Coordkit module shares are luakit's values (denylist.ErrClosed ==
// ratelimit.ErrClosed == luakit.ErrClosed). They are returned wrapped, with a "ratelimit: " prefix
// and detail.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // a bad option or argument, before any I/O: matched by every option error, an empty key and ErrEmptyIdentity
	ErrForeignData   = luakit.ErrForeignData   // the deny list's key holds another Redis type; nothing was written
	ErrUncertain     = luakit.ErrUncertain     // a write may have happened but no reply was read
	ErrClosed        = luakit.ErrClosed        // a call after Close, and callers waiting on a shared read when it closes
	ErrNilClient     = luakit.ErrNilClient     // New given a nil rueidis.Client
)

// ErrEmptyIdentity is returned, before any I/O, for an empty identity (given to [List.SetDenied] or
// [List.IsDenied], or to ratelimit's deny-list options). It matches [ErrInvalidConfig];
// ratelimit.ErrEmptyIdentity is the same value.
var ErrEmptyIdentity = luakit.ConfigSentinel("ratelimit: empty deny-list identity")

var (
	errNilClient = fmt.Errorf("ratelimit: %w", ErrNilClient)
	errClosed    = fmt.Errorf("ratelimit: %w", ErrClosed)
	errEmptyKey  = fmt.Errorf("ratelimit: %w", luakit.ValidateKey("deny-list key", ""))
)

// isWrongType reports whether err is a WRONGTYPE reply.
func isWrongType(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}
