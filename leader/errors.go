package leader

import (
	"errors"

	"github.com/coordkit/coordkit/luakit"
)

// The causes that end a term (context.Cause of [Term.Context], [Term.Err], [Change].Cause) other than
// Run's context ending. They are luakit's shared values, the causes of every Coordkit handle
// (leader.ErrLost == lock.ErrLost == luakit.ErrLost), so one errors.Is check reads a term's end and a
// lock's alike.
var (
	ErrLost     = luakit.ErrLost     // the server refused a renewal: the lease expired or was deleted, so another candidate may lead (also: the client was closed under the term)
	ErrExpired  = luakit.ErrExpired  // no renewal was confirmed before the lease's local deadline minus the safety margin: the leader fenced itself off before the server lease could expire
	ErrReleased = luakit.ErrReleased // the elected callback returned: leadership was relinquished and the lease released
)

// The other conditions every Coordkit module shares, as the election returns them.
var (
	ErrNoPermission  = luakit.ErrNoPermission  // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrInvalidConfig = luakit.ErrInvalidConfig // every error New returns for a bad name, key pair or option; nothing was sent to the server
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
)

// The election's own errors. Compare with errors.Is: most are returned wrapped with detail.
var (
	// ErrRunning is returned by [Election.Run] and [Election.Start] when the election already runs:
	// one Election campaigns at most once at a time.
	ErrRunning = errors.New("leader: election already running")

	// ErrNotRunning is returned by [Election.Stop] when [Election.Start] was not called.
	ErrNotRunning = errors.New("leader: election not started")

	// ErrCallbackPanic is wrapped by the error Run returns when the elected or revoked callback panicked.
	ErrCallbackPanic = errors.New("leader: callback panicked")

	// ErrRecoveryExhausted is wrapped, with the last failure, by the error Run returns when campaigning
	// could not reach the server for the whole connection-recovery budget ([WithRecoveryBudget]).
	// Check the address and the network, recreate the client if it cannot reconnect, then run again.
	ErrRecoveryExhausted = errors.New("leader: connection-recovery budget exhausted")
)
