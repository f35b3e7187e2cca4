package latch

import (
	"errors"
	"strconv"
)

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrExists is returned by [Latches.Create] when the key already holds a latch (of any
	// generation, complete or not). Nothing was written.
	ErrExists = errors.New("latch: a latch already exists at the key")

	// ErrNotFound is returned by [Latches.Join] when no latch exists at the key ("none": never created,
	// deleted, or expired).
	ErrNotFound = errors.New("latch: no latch at the key")

	// ErrCompleted is returned by [Latch.CountDown] and [Latch.Abort] when the generation's count had
	// already reached zero. Nothing was written.
	ErrCompleted = errors.New("latch: generation already completed")

	// ErrReplaced is returned by [Latch.Count] and [Latch.Abort] when the key no longer holds the
	// handle's generation: a [Latches.Reset] replaced it, or it was deleted. ([Latch.CountDown] reports
	// the same situation as -1, and [Latch.Wait] as false.)
	ErrReplaced = errors.New("latch: generation replaced or deleted")

	// ErrExpired is returned when the generation's expiry (see [WithExpiry]) has passed on the server's
	// clock and the key is gone. [Latch.Wait] returns it (with false) instead of plain false, so callers
	// can tell a timed-out batch from a replaced one.
	ErrExpired = errors.New("latch: latch expired")

	// ErrAborted is wrapped by every [*AbortedError].
	ErrAborted = errors.New("latch: generation aborted")

	// ErrWrongType is returned when the key holds a value that is not a latch (another Redis type, or a
	// hash without the latch's fields). Nothing was written.
	ErrWrongType = errors.New("latch: key holds a value that is not a latch")

	// ErrInvalidCount is returned, before any I/O, for a negative initial count.
	ErrInvalidCount = errors.New("latch: count must not be negative")

	// ErrInvalidExpiry is returned, before any I/O, by [WithExpiry] for an expiry under one millisecond.
	ErrInvalidExpiry = errors.New("latch: expiry must be at least 1ms")

	// ErrUncertain wraps failures where a command that writes (Create, Reset, CountDown, Abort,
	// Delete) may have reached the server but no reply was read (timeout, cancellation, broken
	// connection): it may or may not have been applied. A CountDown reported uncertain must not be
	// blindly retried, or the count may drop twice.
	ErrUncertain = errors.New("latch: outcome uncertain")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("latch: nil rueidis client")
)

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
