package leader

import "errors"

// Sentinel errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrNilClient is returned by [New] for a nil rueidis.Client.
	ErrNilClient = errors.New("leader: nil rueidis client")

	// ErrInvalidConfig is wrapped by every configuration error [New] returns (bad option, bad key, keys
	// in different Cluster slots). Nothing was sent to the server.
	ErrInvalidConfig = errors.New("leader: invalid configuration")

	// ErrRunning is returned by [Election.Run] and [Election.Start] when the election already runs:
	// one Election campaigns at most once at a time.
	ErrRunning = errors.New("leader: election already running")

	// ErrNotRunning is returned by [Election.Stop] when [Election.Start] was not called.
	ErrNotRunning = errors.New("leader: election not started")

	// ErrCallbackPanic is wrapped by the error Run returns when the elected or revoked callback panicked.
	ErrCallbackPanic = errors.New("leader: callback panicked")

	// ErrLeaseLost is the term cause (context.Cause of [Term.Context]) when the server refused a renewal:
	// the lease expired or was deleted, so another candidate may lead.
	ErrLeaseLost = errors.New("leader: lease lost")

	// ErrDeadline is the term cause when no renewal was confirmed before the lease's local deadline minus
	// the safety margin: the leader fenced itself off before the server lease could expire.
	ErrDeadline = errors.New("leader: renewal not confirmed before the local deadline")

	// ErrRelinquished is the term cause when the elected callback returned.
	ErrRelinquished = errors.New("leader: leadership relinquished")
)
