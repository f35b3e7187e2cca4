package redlock

import (
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// errMalformedReply reports a script reply of an unexpected shape (a bug or a foreign script).
var errMalformedReply = errors.New("redlock: malformed script reply")

// acquireReply is one node's decoded acquire.lua reply.
type acquireReply struct {
	granted bool
	counter int64  // fenced mode: the node's fence counter when it granted
	runID   string // quarantine on: the server's INFO run_id when it granted
	uptime  int64  // quarantine on: its uptime_in_seconds when it granted
}

// decodeAcquire decodes acquire.lua's reply: whether this node granted the lock and, in fenced mode,
// its counter; with probe (the restart quarantine on), the server's run_id and uptime.
func decodeAcquire(msg rueidis.RedisMessage, err error, fenced, probe bool) (acquireReply, error) {
	if err != nil {
		return acquireReply{}, err
	}
	arr, err := msg.ToArray()
	if err != nil || len(arr) == 0 {
		return acquireReply{}, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	code, err := arr[0].AsInt64()
	if err != nil {
		return acquireReply{}, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	rest := make([]string, 0, len(arr)-1)
	for _, m := range arr[1:] {
		s, err := m.ToString()
		if err != nil {
			return acquireReply{}, fmt.Errorf("%w: acquire", errMalformedReply)
		}
		rest = append(rest, s)
	}
	return interpretAcquire(code, rest, fenced, probe)
}

// interpretAcquire is the pure part of decodeAcquire: code is the reply's first element, rest the
// others as strings.
func interpretAcquire(code int64, rest []string, fenced, probe bool) (acquireReply, error) {
	switch {
	case code == luakit.StatusBusy && len(rest) == 0:
		return acquireReply{}, nil
	case code == luakit.StatusCounter && len(rest) == 1:
		return acquireReply{}, counterReason(rest[0])
	case code != luakit.StatusOK:
		return acquireReply{}, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	want := 0
	if fenced {
		want++
	}
	if probe {
		want += 2
	}
	if len(rest) != want {
		return acquireReply{}, fmt.Errorf("%w: acquire", errMalformedReply)
	}
	r := acquireReply{granted: true}
	if fenced {
		v, err := luakit.ParseInt64(rest[0])
		if err != nil || v < 0 {
			return acquireReply{}, &CounterError{Reason: CounterMalformed}
		}
		r.counter, rest = v, rest[1:]
	}
	if probe {
		up, err := luakit.ParseInt64(rest[1])
		if rest[0] == "" || err != nil || up < 0 {
			return acquireReply{}, fmt.Errorf("%w: acquire: run_id or uptime", errMalformedReply)
		}
		r.runID, r.uptime = rest[0], up
	}
	return r, nil
}

func counterReason(s string) error {
	switch r := CounterReason(s); r {
	case CounterWrongType, CounterExpiring, CounterMalformed, CounterNegative:
		return &CounterError{Reason: r}
	}
	return fmt.Errorf("%w: counter reason", errMalformedReply)
}

// decodeFence decodes fence.lua's reply: nil when the node's counter now holds the token or more
// (status 1), ErrNotOwner when the node no longer holds this owner's lock (-1 absent, -2 another
// owner), a *CounterError for the row {-4, reason}.
func decodeFence(msg rueidis.RedisMessage, err error) error {
	if err != nil {
		return err
	}
	status, rest, err := luakit.ReplyStatus(msg)
	switch {
	case err != nil:
		return fmt.Errorf("%w: fence", errMalformedReply)
	case status == luakit.StatusCounter && len(rest) == 1:
		s, err := rest[0].ToString()
		if err != nil {
			return fmt.Errorf("%w: fence", errMalformedReply)
		}
		return counterReason(s)
	case len(rest) != 0:
		return fmt.Errorf("%w: fence", errMalformedReply)
	case status == luakit.StatusOK:
		return nil
	case status == luakit.StatusAbsent, status == luakit.StatusNotOwner:
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

// decodeOwned decodes the status of the owner-checked script op: 1 (nil), -1 absent or -2 another
// owner's (ErrNotOwner).
func decodeOwned(msg rueidis.RedisMessage, err error, op string) error {
	if err != nil {
		return err
	}
	n, err := msg.AsInt64()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s", errMalformedReply, op)
	case n == luakit.StatusOK:
		return nil
	case n == luakit.StatusAbsent, n == luakit.StatusNotOwner:
		return ErrNotOwner
	}
	return fmt.Errorf("%w: %s", errMalformedReply, op)
}

// decodeRelease decodes release.lua's status: 1 deleted, -1 absent, -2 held by another owner. Any of
// the three means the node replied.
func decodeRelease(msg rueidis.RedisMessage, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, err := msg.AsInt64()
	if err != nil || n < luakit.StatusNotOwner || n > luakit.StatusOK || n == luakit.StatusBusy {
		return 0, fmt.Errorf("%w: release", errMalformedReply)
	}
	return n, nil
}
