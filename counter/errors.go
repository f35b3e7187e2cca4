package counter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Conditions every Coordkit module shares. These are luakit's values (counter.ErrUncertain ==
// luakit.ErrUncertain), so one errors.Is check works whichever module returned the error; the errors
// the counter returns match them and start with "counter: ".
var (
	ErrNoPermission  = luakit.ErrNoPermission  // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrUncertain     = luakit.ErrUncertain     // a write was sent and no reply read: it may have been applied
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument, found before any I/O
	ErrInvalidTTL    = luakit.ErrInvalidTTL    // a TTL below 0, or above 0 and below 1ms (before any I/O)
	ErrForeignData   = luakit.ErrForeignData   // the key holds something other than a counter (ErrNotInteger)
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
	ErrClosed        = luakit.ErrClosed        // a call after Close of a Store, Buffered or Bounded
)

// The counter's own conditions. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrDisconnected is returned while the [Store] cannot reach the server: by the call that found the
	// connection broken (a dial, read or write error) and then, at once and without touching the
	// client, by every later call until a background probe reaches the server again. A call refused
	// this way sent nothing. The call that found the connection broken is also [ErrUncertain] unless
	// the failure was a dial error (nothing sent). Callers decide what an unreachable store means:
	// fail open (allow) or fail closed (deny); see the package example.
	ErrDisconnected = errors.New("counter: server unreachable")

	// ErrOverflow is returned when an increment would take a counter outside the int64 range (or, for
	// [Buffered.Add], the pending delta). Nothing was written: the counter keeps its value and expiry.
	ErrOverflow = errors.New("counter: increment would overflow int64")

	// ErrNotInteger is returned when the key holds foreign data: a string that is not the canonical
	// decimal form of an int64 (an optional '-', no '+', no leading zeros or spaces, within range), or
	// a key of another type (the server's WRONGTYPE). It matches [ErrForeignData] too. Nothing was
	// written. The error never quotes the value.
	ErrNotInteger error = &kindError{"counter: key does not hold a decimal int64", []error{luakit.ErrForeignData}}

	// ErrInvalidDelta is returned, before any I/O, for a delta that must be positive and is not. It
	// matches [ErrInvalidConfig] too.
	ErrInvalidDelta = luakit.ConfigSentinel("counter: delta must be positive")
)

// The shared values as the counter returns them: with the module's prefix.
var (
	errUncertain = &kindError{"counter: outcome uncertain", []error{luakit.ErrUncertain}}
	errClosed    = &kindError{"counter: closed", []error{luakit.ErrClosed}}
	errNilClient = &kindError{"counter: nil rueidis client", []error{luakit.ErrNilClient}}
)

// kindError is an error with its own message that matches (errors.Is / errors.As) every error of errs.
type kindError struct {
	msg  string
	errs []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.errs }

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

// serverError maps a server error reply to the package's sentinels, keeping the reply as detail (so
// luakit.Classify still sees it). The replies mapped are the server's own: INCRBY's overflow and
// "not an integer" errors, and WRONGTYPE.
func serverError(re *rueidis.RedisError, err error) error {
	msg := re.Error()
	switch {
	case strings.Contains(msg, "overflow"):
		return fmt.Errorf("%w: %w", ErrOverflow, err)
	case strings.Contains(msg, "not an integer"), strings.HasPrefix(msg, "WRONGTYPE"):
		return fmt.Errorf("%w: %w", ErrNotInteger, err)
	}
	return fmt.Errorf("counter: %w", err)
}
