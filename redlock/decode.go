package redlock

import (
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// errMalformedReply reports a script reply of an unexpected shape (a bug or a foreign script).
var errMalformedReply = errors.New("redlock: malformed script reply")

// decodeAcquire decodes acquire.lua's reply: whether this node granted the lock and, in fenced mode,
// its counter.
func decodeAcquire(msg rueidis.RedisMessage, err error, fenced bool) (bool, int64, error) {
	if err != nil {
		return false, 0, err
	}
	arr, err := msg.ToArray()
	if err != nil || len(arr) == 0 {
		return false, 0, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	code, err := arr[0].AsInt64()
	if err != nil {
		return false, 0, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	var second string
	if len(arr) > 1 {
		if second, err = arr[1].ToString(); err != nil {
			return false, 0, fmt.Errorf("%w: acquire", errMalformedReply)
		}
	}
	return interpretAcquire(code, second, len(arr), fenced)
}

// interpretAcquire is the pure part of decodeAcquire: code and second are the reply's elements, n its
// length.
func interpretAcquire(code int64, second string, n int, fenced bool) (bool, int64, error) {
	switch {
	case code == 0 && n == 1:
		return false, 0, nil
	case code == 1 && n == 1 && !fenced:
		return true, 0, nil
	case code == 1 && n == 2 && fenced:
		v, err := luakit.ParseInt64(second)
		if err != nil || v < 0 {
			return false, 0, &CounterError{Reason: CounterMalformed}
		}
		return true, v, nil
	case code == -1 && n == 2:
		return false, 0, counterReason(second)
	}
	return false, 0, fmt.Errorf("%w: acquire", errMalformedReply)
}

func counterReason(s string) error {
	switch r := CounterReason(s); r {
	case CounterWrongType, CounterExpiring, CounterMalformed, CounterNegative:
		return &CounterError{Reason: r}
	}
	return fmt.Errorf("%w: counter reason", errMalformedReply)
}

// decodeFence decodes fence.lua's reply: nil when the node's counter now holds the token or more.
func decodeFence(msg rueidis.RedisMessage, err error) error {
	if err != nil {
		return err
	}
	if msg.IsString() {
		s, _ := msg.ToString()
		return counterReason(s)
	}
	n, err := msg.AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: fence", errMalformedReply)
	case n == 1:
		return nil
	case n == 0:
		return ErrNotOwner
	}
	return fmt.Errorf("%w: fence", errMalformedReply)
}

// decodeExtend decodes extend.lua's reply: nil when this node extended the lock, ErrNotOwner when it
// does not hold this owner's token.
func decodeExtend(msg rueidis.RedisMessage, err error) error { return decodeOwned(msg, err, "extend") }

// decodeVerify decodes verify.lua's reply: nil when this node holds this owner's token, ErrNotOwner
// when it does not.
func decodeVerify(msg rueidis.RedisMessage, err error) error { return decodeOwned(msg, err, "verify") }

// decodeOwned decodes a 1 (nil) / 0 (ErrNotOwner) reply of the script op.
func decodeOwned(msg rueidis.RedisMessage, err error, op string) error {
	if err != nil {
		return err
	}
	n, err := msg.AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s", errMalformedReply, op)
	case n == 1:
		return nil
	case n == 0:
		return ErrNotOwner
	}
	return fmt.Errorf("%w: %s", errMalformedReply, op)
}

// decodeRelease decodes release.lua's reply: 1 deleted, 0 absent, -1 held by another owner. Any of the
// three means the node replied.
func decodeRelease(msg rueidis.RedisMessage, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, err := msg.AsInt64()
	if err != nil || n < -1 || n > 1 {
		return 0, fmt.Errorf("%w: release", errMalformedReply)
	}
	return n, nil
}
