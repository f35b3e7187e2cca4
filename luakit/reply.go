package luakit

import (
	"fmt"

	"github.com/redis/rueidis"
)

// The statuses of the script reply convention (see the package documentation, # Replies). Each
// means one thing in every script; the values that follow a status are documented in each script's
// header.
const (
	StatusOK        int64 = 1  // applied (acquired, renewed, released, written), or a read found the state
	StatusBusy      int64 = 0  // not applied: others hold or use up the resource (values: until when)
	StatusAbsent    int64 = -1 // nothing there: no key, no hold, or it expired; nothing written
	StatusNotOwner  int64 = -2 // held by another owner or generation; nothing written
	StatusForeign   int64 = -3 // the key holds data the primitive did not write (value: reason); nothing written
	StatusCounter   int64 = -4 // the fence counter cannot issue a token (value: a [CounterReason]); nothing written
	StatusMismatch  int64 = -5 // stored settings differ from the call's (value: what is stored); nothing written
	StatusAborted   int64 = -6 // the generation was aborted (value: the reason); nothing written
	StatusCompleted int64 = -7 // the work already completed (values: its result, if any); nothing written
)

// ReplyStatus reads a script reply of the convention: an integer status alone, or an array whose first
// element is the status, followed by the values it returns as rest (nil for a status alone). It does
// not allocate. A reply of another shape, or a status outside the table, is an error (an error reply
// is returned as is).
func ReplyStatus(msg rueidis.RedisMessage) (int64, []rueidis.RedisMessage, error) {
	if err := msg.Error(); err != nil {
		return 0, nil, err
	}
	var status int64
	var rest []rueidis.RedisMessage
	if msg.IsInt64() {
		status, _ = msg.AsInt64()
	} else {
		arr, err := msg.ToArray()
		if err != nil || len(arr) == 0 {
			return 0, nil, fmt.Errorf("luakit: script reply is neither a status nor a status row")
		}
		if !arr[0].IsInt64() {
			return 0, nil, fmt.Errorf("luakit: script reply's first element is not a status")
		}
		status, _ = arr[0].AsInt64()
		rest = arr[1:]
	}
	if status < StatusCompleted || status > StatusOK {
		return 0, nil, fmt.Errorf("luakit: script reply has unknown status %d", status)
	}
	return status, rest, nil
}
