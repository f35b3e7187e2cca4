package counter

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrDisconnected is returned while the [Store] cannot reach the server: by the call that found the
	// connection broken (a dial, read or write error) and then, at once and without touching the
	// client, by every later call until a background probe reaches the server again. A call refused
	// this way sent nothing. The call that found the connection broken is also [ErrUncertain] unless
	// the failure was a dial error (nothing sent). Callers decide what an unreachable store means:
	// fail open (allow) or fail closed (deny); see the package example.
	ErrDisconnected = errors.New("counter: server unreachable")

	// ErrUncertain wraps failures where a write may have reached the server but no reply was read
	// (timeout, cancellation, broken connection): the increment may or may not have been applied.
	ErrUncertain = errors.New("counter: outcome uncertain")

	// ErrOverflow is returned when an increment would take a counter outside the int64 range. Nothing
	// was written: the counter keeps its value and expiry.
	ErrOverflow = errors.New("counter: increment would overflow int64")

	// ErrNotInteger is returned when the key holds a value that is not a decimal int64 (or a
	// non-string type). Nothing was written.
	ErrNotInteger = errors.New("counter: key does not hold a decimal int64")

	// ErrInvalidDelta is returned, before any I/O, for a delta that must be positive and is not.
	ErrInvalidDelta = errors.New("counter: delta must be positive")

	// ErrInvalidTTL is returned, before any I/O, for a negative TTL or a positive TTL under 1ms.
	ErrInvalidTTL = errors.New("counter: ttl must be 0 (none) or at least 1ms")

	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("counter: nil rueidis client")

	// ErrClosed is returned by calls on a closed [Store], [Buffered] or [Bounded].
	ErrClosed = errors.New("counter: closed")
)

// BatchError reports the per-item failures of [Store.BatchIncrement] or [Store.GetMany]. Errs has
// one entry per input item, nil where the item succeeded. errors.Is / errors.As look through every
// item's error.
type BatchError struct {
	Errs []error
}

// Error summarises the first failure and the number of failed items.
func (e *BatchError) Error() string {
	n, first, idx := 0, error(nil), -1
	for i, err := range e.Errs {
		if err != nil {
			if first == nil {
				first, idx = err, i
			}
			n++
		}
	}
	if first == nil {
		return "counter: batch failed"
	}
	return fmt.Sprintf("counter: %d of %d batch items failed; item %d: %v", n, len(e.Errs), idx, first)
}

// Unwrap returns the non-nil item errors.
func (e *BatchError) Unwrap() []error {
	out := make([]error, 0, len(e.Errs))
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// serverError maps a server error reply of a counter script to the package's sentinels, keeping the
// reply as detail.
func serverError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "overflow"):
		return fmt.Errorf("%w: %w", ErrOverflow, err)
	case strings.Contains(msg, "not an integer"), strings.Contains(msg, "WRONGTYPE"):
		return fmt.Errorf("%w: %w", ErrNotInteger, err)
	}
	return err
}
