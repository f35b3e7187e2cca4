package luakit

import (
	"errors"
	"fmt"
)

// ErrCounter is wrapped by every [*CounterError]: a fence counter cannot issue a fencing token. The
// lock and redlock modules (and leader, through lock) re-export it, so one errors.Is check serves them
// all.
var ErrCounter = errors.New("coordkit: fence counter cannot issue a token")

// CounterReason says why a fence counter cannot issue a token.
type CounterReason string

// The reasons a fence counter is rejected. In each case the acquisition (or, for redlock, the node
// that reported it) wrote nothing.
const (
	// CounterExpiring: the counter key has a TTL. A counter that can expire can reissue old tokens.
	CounterExpiring CounterReason = "expiring"
	// CounterNegative: the counter holds a negative integer; tokens must be positive.
	CounterNegative CounterReason = "negative"
	// CounterMalformed: the counter holds something other than a decimal int64.
	CounterMalformed CounterReason = "malformed"
	// CounterOverflow: the counter holds 9223372036854775807; the next token would overflow int64.
	CounterOverflow CounterReason = "overflow"
	// CounterWrongType: the counter key holds a non-string Redis type.
	CounterWrongType CounterReason = "wrongtype"
)

// CounterError reports a fence counter that cannot issue a fencing token. It wraps [ErrCounter]. The
// lock and redlock modules return it (their CounterError is this type), so errors.As with either
// finds both.
//
// With reason [CounterWrongType], [CounterMalformed] or [CounterNegative] it also matches
// [ErrForeignData]: the fence key holds data a Coordkit counter never holds (it starts at 1 and only
// grows). [CounterExpiring] and [CounterOverflow] do not: an expiry is a setting of the key, and the
// int64 maximum is a value the counter could have reached; neither is foreign data.
type CounterError struct {
	Reason CounterReason
}

// Error describes the counter problem and how to fix it; it never includes key names.
func (e *CounterError) Error() string {
	switch e.Reason {
	case CounterExpiring:
		return "coordkit: fence counter has an expiry; it must persist (remove the TTL)"
	case CounterNegative:
		return "coordkit: fence counter is negative; fencing tokens must be positive"
	case CounterMalformed:
		return "coordkit: fence counter does not hold a decimal int64"
	case CounterOverflow:
		return "coordkit: fence counter is at the int64 maximum; the next token would overflow"
	case CounterWrongType:
		return "coordkit: fence key holds a non-string type"
	}
	return fmt.Sprintf("coordkit: fence counter unusable (%s)", string(e.Reason))
}

// Unwrap returns [ErrCounter].
func (e *CounterError) Unwrap() error { return ErrCounter }

// Is reports whether target is [ErrForeignData] and the reason says the fence key holds foreign data.
func (e *CounterError) Is(target error) bool {
	if target != ErrForeignData {
		return false
	}
	switch e.Reason {
	case CounterWrongType, CounterMalformed, CounterNegative:
		return true
	}
	return false
}
