package rwlock

import "github.com/coordkit/coordkit/luakit"

// The ownership errors are luakit's shared values (rwlock.ErrLost == luakit.ErrLost), so one errors.Is
// check works whichever Coordkit primitive returned the error. What each means for every handle is
// the contract in package github.com/coordkit/coordkit/luakit/ownership; the comments say what it
// means here. Most are returned wrapped with a "rwlock: " prefix and detail.
var (
	ErrNoPermission     = luakit.ErrNoPermission     // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrNotAcquired      = luakit.ErrNotAcquired      // TryAcquireRead: a writer holds the key; TryAcquireWrite: anyone does; nothing written
	ErrLateReply        = luakit.ErrLateReply        // granted after the local estimate elapsed: the entry was removed again
	ErrUncertain        = luakit.ErrUncertain        // no reply read: an acquisition, renewal or release may have run
	ErrLost             = luakit.ErrLost             // a Lease's cause: the server no longer holds this entry
	ErrExpired          = luakit.ErrExpired          // a Lease's cause: its local estimate elapsed without a confirmed renewal
	ErrReleased         = luakit.ErrReleased         // a Lease's cause: a release (Release or Close) was sent
	ErrKeepAliveRunning = luakit.ErrKeepAliveRunning // a second KeepAlive on one Lease
	ErrInvalidTTL       = luakit.ErrInvalidTTL       // a lease TTL under 1ms (acquisition or ExtendTTL), before any I/O
)

// The other conditions every Coordkit module shares, as the rwlock returns them.
var (
	ErrInvalidConfig = luakit.ErrInvalidConfig // every bad option or argument (empty key, TTL), before any I/O
	ErrNilClient     = luakit.ErrNilClient     // New was given a nil rueidis.Client
)
