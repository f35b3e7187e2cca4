package luakit

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"

	"github.com/redis/rueidis"
)

// Class is the retry class of an error returned by a Redis operation; see
// [Classify]. The zero value is ClassNone.
type Class int

const (
	// ClassNone is the class of a nil error.
	ClassNone Class = iota
	// ClassTransient means the server answered that it cannot run the command
	// now (LOADING, BUSY, CLUSTERDOWN, TRYAGAIN, MASTERDOWN, READONLY,
	// NOREPLICAS, OOM, MOVED, ASK), the Cluster has no node for the slot, or
	// the client could not connect to send it (see [NotSent]).
	// The command did not run; retrying later with backoff may succeed.
	ClassTransient
	// ClassTerminal means the server rejected the command for a reason a retry
	// will not fix (NOPERM, WRONGTYPE, NOAUTH, WRONGPASS, "ERR ..." and any
	// other error reply not listed as transient, including errors raised by
	// a script), or a luakit precondition failed (ErrUnsupported,
	// ErrCrossSlot, ErrEmptyKey, ErrMalformedInt), or a shared terminal
	// condition was reported (ErrInvalidConfig, ErrForeignData,
	// ErrNilClient, ErrClosed, ErrNoPermission). A script error raised after a write does not
	// undo that write.
	ClassTerminal
	// ClassUncertain means no reply was read, so the command may or may not have
	// run on the server: context cancellation or deadline, network errors,
	// io.EOF / io.ErrUnexpectedEOF, os.ErrDeadlineExceeded,
	// rueidis.ErrClosing, rueidis.ErrDoCacheAborted. Operations that change
	// ownership must treat this as "maybe applied" (fail closed).
	ClassUncertain
	// ClassUnknown means any other non-nil error, including rueidis.Nil (a nil
	// reply is a value, not a failure, and callers must decide what it
	// means). Callers that must be safe should treat it like
	// ClassUncertain.
	ClassUnknown
)

// String returns "none", "transient", "terminal", "uncertain" or "unknown"
// (or "Class(n)" for an out-of-range value). Suitable as a metric attribute.
func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassTransient:
		return "transient"
	case ClassTerminal:
		return "terminal"
	case ClassUncertain:
		return "uncertain"
	case ClassUnknown:
		return "unknown"
	}
	return "Class(" + FormatInt64(int64(c)) + ")"
}

// transientPrefixes are the error-reply codes meaning "not now".
var transientPrefixes = []string{
	"LOADING", "BUSY", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY",
	"NOREPLICAS", "OOM", "MOVED", "ASK",
}

// Classify returns the retry class of err (see the Class constants),
// looking through wrapped errors with errors.As / errors.Is. An [*AckError]
// wins over anything else in the chain ([ClassUncertain]: the write was
// applied, its survival is not known), then a server error reply, then
// luakit's own sentinels, then the uncertain transport errors. It never blocks and is safe for
// concurrent use.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	if errors.Is(err, ErrNotAcknowledged) {
		return ClassUncertain // applied on the primary; whether it survives a failover is not known
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		if re.IsNil() {
			return ClassUnknown
		}
		return classifyReply(re.Error())
	}
	if NotSent(err) {
		return ClassTransient
	}
	switch {
	case errors.Is(err, ErrUnsupported), errors.Is(err, ErrCrossSlot),
		errors.Is(err, ErrEmptyKey), errors.Is(err, ErrMalformedInt),
		errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrForeignData),
		errors.Is(err, ErrNilClient), errors.Is(err, ErrClosed),
		errors.Is(err, ErrNoPermission):
		return ClassTerminal
	case errors.Is(err, rueidis.ErrNoSlot):
		return ClassTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, rueidis.ErrClosing), errors.Is(err, rueidis.ErrDoCacheAborted),
		errors.Is(err, net.ErrClosed):
		return ClassUncertain
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return ClassUncertain
	}
	return ClassUnknown
}

// NotSent reports whether err proves that the command never reached the
// server: a failed dial (a *net.OpError with Op "dial", anywhere in the chain:
// connection refused, host unreachable, connect timeout), which rueidis
// returns when it has no connection to write the command on. [Classify]
// returns [ClassTransient] for such an error, before looking at any context
// error it wraps. An error after the connection was established (EOF, reset,
// a read timeout) is not NotSent: the command may have been written. It never
// blocks and is safe for concurrent use.
func NotSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// classifyReply classifies the text of a server error reply by its first
// word. rueidis strips a leading "ERR " from replies, so the text may start
// with a code ("WRONGTYPE ...") or directly with the message; an "ERR"
// reply whose message happens to begin with a transient code is therefore
// indistinguishable from that code (no server reply does this).
func classifyReply(msg string) Class {
	code := msg
	if i := strings.IndexByte(msg, ' '); i >= 0 {
		code = msg[:i]
	}
	for _, p := range transientPrefixes {
		if code == p {
			return ClassTransient
		}
	}
	return ClassTerminal
}

// IsTransient reports whether Classify(err) == ClassTransient.
func IsTransient(err error) bool { return Classify(err) == ClassTransient }

// IsTerminal reports whether Classify(err) == ClassTerminal.
func IsTerminal(err error) bool { return Classify(err) == ClassTerminal }

// IsUncertain reports whether Classify(err) == ClassUncertain.
func IsUncertain(err error) bool { return Classify(err) == ClassUncertain }

// MayHaveApplied reports whether a write whose call failed with err may
// have been applied on the server, so that an owner-checked cleanup is owed
// behind it: true for [ClassUncertain] (no reply was read) and
// [ClassUnknown] (treated as uncertain, to be safe); false for nil, for a
// server error reply of any class and for every other [ClassTransient] or
// [ClassTerminal] error (refused before it was sent, or a luakit sentinel).
// An error reply proves that nothing was written only for a script that
// fails before its first write, as every Coordkit script does (a script's
// ACL check comes before its first write, and the server refuses only the
// first write of a script for OOM). It never blocks and is safe for
// concurrent use.
func MayHaveApplied(err error) bool {
	c := Classify(err)
	return c == ClassUncertain || c == ClassUnknown
}

// ErrUnsupported is matched (via errors.Is) by every [*UnsupportedError]:
// the server lacks a command a primitive needs.
var ErrUnsupported = errors.New("luakit: server lacks a required feature")

// UnsupportedError reports that the server lacks a feature, found by
// probing its command (see [Probe]) before any write.
// errors.Is(err, ErrUnsupported) reports true.
type UnsupportedError struct {
	// Feature is the human name, e.g. "hash-field expiry".
	Feature string
	// Command is the probed command, e.g. "HPEXPIRE".
	Command string
	// Minimum names the first servers that have it, e.g.
	// "Redis 7.4 or Valkey 9.0"; may be empty.
	Minimum string
}

// Error returns a message such as "luakit: server lacks hash-field expiry
// (HPEXPIRE); requires Redis 7.4 or Valkey 9.0".
func (e *UnsupportedError) Error() string {
	s := "luakit: server lacks " + e.Feature + " (" + e.Command + ")"
	if e.Minimum != "" {
		s += "; requires " + e.Minimum
	}
	return s
}

// Unwrap returns ErrUnsupported.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// ErrNoPermission is matched (via errors.Is) by every [*PermissionError]: the server's ACL refused a
// command, a key or a channel to the connection's user (a NOPERM reply, or a script's own check before
// its first write). It is terminal ([Classify] returns [ClassTerminal]): no primitive retries it.
// Each module re-exports it under its own name (lock.ErrNoPermission == luakit.ErrNoPermission).
var ErrNoPermission = errors.New("coordkit: no permission")

// PermissionError reports a NOPERM reply. Its message is the server's reason with the script
// location removed; the server's text names the user and the command, never a key or a value.
// errors.Is(err, ErrNoPermission) reports true; errors.As still finds the *rueidis.RedisError.
type PermissionError struct {
	// Reason is the server's text without its "NOPERM" code, e.g. "User app has no permissions to
	// run the 'pexpire' command".
	Reason string
	reply  error
}

// Error returns "coordkit: no permission: " followed by Reason.
func (e *PermissionError) Error() string { return "coordkit: no permission: " + e.Reason }

// Unwrap returns the server's error reply.
func (e *PermissionError) Unwrap() error { return e.reply }

// Is reports whether target is ErrNoPermission.
func (e *PermissionError) Is(target error) bool { return target == ErrNoPermission }

// Permission returns err as a [*PermissionError] when it carries a NOPERM reply from the server
// (directly or through a script), and err unchanged otherwise (nil stays nil). [Script] applies it to
// every reply, so scripts' callers get it without calling it; call it on the replies of plain commands
// (SSUBSCRIBE, GET...). It never blocks and is safe for concurrent use.
func Permission(err error) error {
	if err == nil || errors.Is(err, ErrNoPermission) {
		return err
	}
	var re *rueidis.RedisError
	if !errors.As(err, &re) || re.IsNil() {
		return err
	}
	msg := re.Error()
	reason, ok := strings.CutPrefix(msg, "NOPERM ")
	if !ok {
		// A redis.call the ACL refuses inside a script without the preamble's check: Redis 7.0
		// replies "ERR The user executing the script can't run this command or subcommand",
		// Valkey and later Redis "ERR ACL failure in script: User u has no permissions ...".
		if msg != "NOPERM" && !strings.Contains(msg, "has no permissions to run") &&
			!strings.Contains(msg, "No permissions to access") &&
			!strings.Contains(msg, "can't run this command") && !strings.Contains(msg, "ACL failure") {
			return err
		}
		reason, _ = strings.CutPrefix(msg, "ACL failure in script: ")
	}
	if i := strings.Index(reason, " script:"); i >= 0 {
		reason = reason[:i]
	}
	if i := strings.IndexAny(reason, "\r\n"); i >= 0 {
		reason = reason[:i]
	}
	return &PermissionError{Reason: strings.TrimSpace(reason), reply: err}
}

// permResult returns r with a NOPERM error reply replaced by a [*PermissionError].
func permResult(r rueidis.RedisResult) rueidis.RedisResult {
	err := r.Error()
	if err == nil {
		return r
	}
	if p := Permission(err); p != err {
		return rueidis.NewErrorResult(p)
	}
	return r
}
