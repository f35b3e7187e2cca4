package ratelimit

import "errors"

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrInvalidPolicy is returned by [New], [NewKeyed] and [Limiter.Update], before any I/O, for
	// settings out of range (the message names the field).
	ErrInvalidPolicy = errors.New("ratelimit: invalid policy")

	// ErrInvalidUpdate is returned by [Limiter.Update], before any I/O, when the new policy changes the
	// algorithm (or, for a composite, the number or algorithm of a component), or for an unknown
	// [UpdateMode]. Nothing changed.
	ErrInvalidUpdate = errors.New("ratelimit: update cannot change the algorithm")

	// ErrNegativePermits is returned, before any I/O, for n < 0.
	ErrNegativePermits = errors.New("ratelimit: negative permit count")

	// ErrConfigMismatch is returned when a composite's stored configuration signature differs from this
	// limiter's: another process uses other settings for the key. Nothing was consumed.
	ErrConfigMismatch = errors.New("ratelimit: stored composite configuration differs")

	// ErrDebtOverflow is returned by a GCRA migration whose rescaled debt would not fit in a
	// time.Duration. Nothing was written and the limiter keeps its old settings.
	ErrDebtOverflow = errors.New("ratelimit: migrated GCRA debt out of range")

	// ErrWrongType is returned when the key holds data of another layout or type (a key shared with
	// another limiter kind or data). Nothing was written.
	ErrWrongType = errors.New("ratelimit: key holds foreign data")

	// ErrUncertain wraps failures where a script may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): permits may have been consumed.
	ErrUncertain = errors.New("ratelimit: outcome uncertain")

	// ErrClosed is returned by calls on a closed [Limiter], [Keyed] or [DenyList], and to requests
	// waiting in a queue (or on a shared deny-list read) when it closes.
	ErrClosed = errors.New("ratelimit: closed")

	// ErrNilClient is returned by [New], [NewKeyed] and [NewDenyList] for a nil rueidis.Client.
	ErrNilClient = errors.New("ratelimit: nil rueidis client")

	// ErrEmptyIdentity is returned for an empty deny-list identity.
	ErrEmptyIdentity = errors.New("ratelimit: empty deny-list identity")
)
