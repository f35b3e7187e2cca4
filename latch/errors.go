package latch

import (
	"errors"
	"strconv"

	"github.com/coordkit/coordkit/luakit"
)

// The shared errors are luakit's values (latch.ErrUncertain == luakit.ErrUncertain), so one errors.Is
// check works whichever Coordkit primitive returned the error. They are returned wrapped with a
// "latch: " prefix and the operation; the comments say what each means here.
var (
	ErrNoPermission = luakit.ErrNoPermission // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrUncertain    = luakit.ErrUncertain    // no reply read: a Create, Reset, CountDown, Abort or Delete may have run; do not blindly retry a CountDown
	ErrForeignData  = luakit.ErrForeignData  // the key holds another Redis type, or a hash whose latch fields do not decode; nothing written
	ErrNilClient    = luakit.ErrNilClient    // New was given a nil rueidis.Client
)

// The latch's own errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrExists is returned by [Latches.Create] when the key already holds a latch (of any
	// generation, complete or not). Nothing was written.
	ErrExists = errors.New("latch: a latch already exists at the key")

	// ErrNotFound is returned by [Latches.Join] when no latch exists at the key (never created,
	// deleted, or expired).
	ErrNotFound = errors.New("latch: no latch at the key")

	// ErrCompleted is returned by [Latch.CountDown] and [Latch.Abort] when the generation's count had
	// already reached zero. Nothing was written.
	ErrCompleted = errors.New("latch: generation already completed")

	// ErrReplaced is returned by [Latch.CountDown], [Latch.Count], [Latch.Abort] and [Latch.Wait] when
	// the key no longer holds the handle's generation: a [Latches.Reset] replaced it, or it was
	// deleted. Nothing was written, so late signals never reach a newer generation.
	ErrReplaced = errors.New("latch: generation replaced or deleted")

	// ErrLatchExpired is returned when the generation's expiry (see [WithExpiry]) has passed on the
	// server's clock and the key is gone: by [Latch.Wait] (so callers can tell a timed-out batch from a
	// replaced one), [Latch.CountDown], [Latch.Count] and [Latch.Abort]. It is not luakit.ErrExpired,
	// which means a handle's local estimate elapsed; this is the latch key's server-side expiry.
	ErrLatchExpired = errors.New("latch: latch expired")

	// ErrAborted is wrapped by every [*AbortedError].
	ErrAborted = errors.New("latch: generation aborted")

	// ErrInvalidCount is returned, before any I/O, for a negative initial count. It matches
	// luakit.ErrInvalidConfig.
	ErrInvalidCount error = luakit.ConfigSentinel("latch: count must not be negative")

	// ErrInvalidExpiry is returned, before any I/O, by [WithExpiry] for an expiry under one
	// millisecond. It matches luakit.ErrInvalidConfig.
	ErrInvalidExpiry error = luakit.ConfigSentinel("latch: expiry must be at least 1ms")

	// ErrReasonTooLong is returned, before any I/O, by [Latch.Abort] for a reason longer than
	// [MaxAbortReasonLength] bytes. It matches luakit.ErrInvalidConfig.
	ErrReasonTooLong error = luakit.ConfigSentinel("latch: abort reason longer than 1024 bytes")
)

// MaxAbortReasonLength is the longest reason [Latch.Abort] accepts, in bytes: the reason is stored in
// the latch, published to every waiter and returned by every later call, so it stays small.
const MaxAbortReasonLength = 1024

// AbortedError reports a generation failed by [Latch.Abort]. Waiters of the generation, later
// [Latches.Join] calls and operations on its handles return it. It wraps [ErrAborted].
type AbortedError struct {
	// Reason is the text passed to Abort (possibly empty).
	Reason string
}

// Error includes the quoted abort reason.
func (e *AbortedError) Error() string {
	return "latch: generation aborted: " + strconv.Quote(e.Reason)
}

// Unwrap returns [ErrAborted].
func (e *AbortedError) Unwrap() error { return ErrAborted }
