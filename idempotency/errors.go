package idempotency

import "github.com/coordkit/coordkit/luakit"

// The shared errors are luakit's values (idempotency.ErrUncertain == luakit.ErrUncertain), so one
// errors.Is check works whichever Coordkit primitive returned the error. They are returned wrapped
// with an "idempotency: " prefix and the operation; the comments say what each means here.
var (
	ErrNoPermission = luakit.ErrNoPermission // the server's ACL refused a command, key or channel to the client's user (a NOPERM reply, or a script's check before its first write: nothing written); terminal, never retried
	ErrUncertain    = luakit.ErrUncertain    // no reply read: a claim may have been created (it expires after its TTL), a result stored, a claim abandoned; never retried automatically
	ErrForeignData  = luakit.ErrForeignData  // the key holds another Redis type, or a hash this package did not write (or whose fields were edited); nothing written
	ErrNilClient    = luakit.ErrNilClient    // New was given a nil rueidis.Client
	ErrInvalidTTL   = luakit.ErrInvalidTTL   // a TTL under 1ms, before any I/O; the error also matches luakit.ErrInvalidConfig
)

// ErrInvalidToken is returned, before any I/O, by [Store.Complete] and [Store.Abandon] for an owner
// token that [Store.TryBegin] cannot have issued (empty or malformed). The message never quotes it.
// It matches luakit.ErrInvalidConfig.
var ErrInvalidToken error = luakit.ConfigSentinel("idempotency: malformed owner token")
