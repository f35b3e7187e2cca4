package luakit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Errors that mean the same in every Coordkit module. Each module re-exports the ones it returns
// (counter.ErrUncertain == luakit.ErrUncertain), so one errors.Is check serves a service that uses
// several primitives. Module errors wrap them with the module's name as prefix.
var (
	// ErrInvalidConfig is matched (errors.Is) by every error a constructor or an argument check returns
	// for a bad option or argument, before any I/O: a [*ConfigError], and the modules' own sentinels
	// for invalid arguments where they document it.
	ErrInvalidConfig = errors.New("coordkit: invalid configuration")

	// ErrForeignData is matched by every error that reports a key holding data the primitive did not
	// write: another Redis type (the server's WRONGTYPE), or a value or layout of the right type that
	// does not decode. Nothing was written.
	ErrForeignData = errors.New("coordkit: key holds data this primitive did not write")

	// ErrNilClient is returned by every constructor given a nil rueidis.Client.
	ErrNilClient = errors.New("coordkit: nil rueidis client")

	// ErrClosed is returned by calls made after the value's Close.
	ErrClosed = errors.New("coordkit: closed")
)

// ConfigError is a bad option or argument found before any I/O: the one configuration error of every
// module, built with [InvalidConfig] or [InvalidConfigOf]. It matches [ErrInvalidConfig] with
// errors.Is, and Err when set. Its message is "<module>: <what is wrong>" and never contains a key or
// a secret.
type ConfigError struct {
	Module string // "lock", "ratelimit", ...
	Msg    string // what is wrong, with the value and the accepted range
	Err    error  // what else it matches (errors.Is, errors.As): a sentinel or luakit's key error; nil: none
}

// Error returns "module: msg".
func (e *ConfigError) Error() string { return e.Module + ": " + e.Msg }

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// ConfigSentinel returns a new sentinel error with message msg that also matches [ErrInvalidConfig]
// (errors.Is(s, ErrInvalidConfig) is true, and errors.Is(err, s) works by identity as for any
// sentinel). Modules declare their invalid-argument sentinels with it, such as ErrInvalidCount.
func ConfigSentinel(msg string) error { return &configSentinel{msg: msg} }

type configSentinel struct{ msg string }

func (e *configSentinel) Error() string        { return e.msg }
func (e *configSentinel) Is(target error) bool { return target == ErrInvalidConfig }

// MarkForeign returns err marked so that it also matches [ErrForeignData] when it is the server's
// WRONGTYPE reply (the key holds another Redis type), and err unchanged otherwise. The message and the
// *rueidis.RedisError in the chain stay as they were.
func MarkForeign(err error) error {
	var re *rueidis.RedisError
	if errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE") {
		return &foreignError{err: err}
	}
	return err
}

type foreignError struct{ err error }

func (e *foreignError) Error() string        { return e.err.Error() }
func (e *foreignError) Unwrap() error        { return e.err }
func (e *foreignError) Is(target error) bool { return target == ErrForeignData }

// InvalidConfig returns a [*ConfigError] for module with a formatted message.
func InvalidConfig(module, format string, args ...any) error {
	return &ConfigError{Module: module, Msg: fmt.Sprintf(format, args...)}
}

// InvalidConfigOf returns a [*ConfigError] for module with a formatted message that also matches
// kind: a module's sentinel (ErrInvalidCount, [ErrInvalidTTL]) or a key error of this package
// ([ErrEmptyKey], a [*CrossSlotError]). With format "" the message is kind's own.
func InvalidConfigOf(module string, kind error, format string, args ...any) error {
	msg := kind.Error()
	if format != "" {
		msg = fmt.Sprintf(format, args...)
	}
	return &ConfigError{Module: module, Msg: msg, Err: kind}
}

// OwnerToken returns a fresh owner token: 128 bits from crypto/rand as 32 lowercase hexadecimal
// characters. A token proves ownership of a lease, lock or claim, so treat it as a secret: never log
// it, never put it in an error message, never use it as a metric attribute. crypto/rand.Read never
// fails on supported Go releases (it crashes the program instead), so there is no error to handle.
// Safe for concurrent use.
func OwnerToken() string {
	t := ownerToken()
	return string(t[:])
}

// OwnerTokenLen is the length in bytes of an owner token from [OwnerToken] or [WriteOwnerToken].
const OwnerTokenLen = 32

// WriteOwnerToken writes a fresh owner token, as [OwnerToken] returns it, to b. A primitive that builds
// its keys and arguments in one strings.Builder adds the token to the same buffer and so saves the
// token's own allocation on a hot path. Safe for concurrent use with distinct builders.
func WriteOwnerToken(b *strings.Builder) {
	t := ownerToken()
	b.Write(t[:])
}

func ownerToken() [OwnerTokenLen]byte {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	var t [OwnerTokenLen]byte
	hex.Encode(t[:], raw[:])
	return t
}
