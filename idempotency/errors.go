package idempotency

import "errors"

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("idempotency: nil rueidis client")

	// ErrInvalidTTL is returned, before any I/O, for a TTL shorter than one millisecond.
	ErrInvalidTTL = errors.New("idempotency: TTL must be at least 1ms")

	// ErrInvalidToken is returned, before any I/O, by [Store.Complete] and [Store.Abandon] for an owner
	// token that [Store.TryBegin] cannot have issued (empty or malformed). The message never quotes it.
	ErrInvalidToken = errors.New("idempotency: malformed owner token")

	// ErrUncertain wraps failures where a script may have reached the server but no reply was read
	// (context cancellation or deadline, a broken connection). The server state is unknown: a claim may
	// have been created (it then expires after its TTL, since its token was never returned), a result
	// may or may not have been stored, a claim may or may not have been abandoned. Scripts are never
	// retried automatically after such a failure; a later [Store.TryBegin] shows the state.
	ErrUncertain = errors.New("idempotency: outcome uncertain")

	// ErrForeignData is returned when the key holds a hash this package did not write (or whose fields
	// were edited). Nothing was written. A key of another Redis type fails with the server's WRONGTYPE
	// error instead.
	ErrForeignData = errors.New("idempotency: key holds data not written by this package")
)
