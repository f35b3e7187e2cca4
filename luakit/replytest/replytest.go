// Package replytest builds server replies, a client that fails every call, a client that must never
// be called, and the failures a write can meet, and recognises a script's calls among recorded commands, for unit tests of code that
// classifies errors or decides cleanups without a server.
// Behaviour tests run against real servers (see testkit); this package only gives such fakes a reply
// that luakit.Classify sees as the server's.
package replytest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Status is the text of a simple-string reply (RESP '+', such as "OK"), for [Msg] and [Array]; a
// plain string is a bulk string.
type Status string

// Msg returns v as the server reply rueidis decodes it to: an int or int64 is an integer reply, a
// string a bulk string, a [Status] a simple string, nil a null reply, a []any an array of such
// values (nested arrays too). It fails t on another type. rueidis has no exported constructor: the
// message goes through its cache format (CacheUnmarshalView). Safe for concurrent use.
func Msg(t testing.TB, v any) rueidis.RedisMessage {
	t.Helper()
	return Cached(t, v, 0)
}

// Cached returns [Msg] of v marked as a reply from rueidis' client-side cache with ttl of cache life
// left (its CachePTTL, in whole ms); ttl <= 0 is Msg, a reply that was not cached.
func Cached(t testing.TB, v any, ttl time.Duration) rueidis.RedisMessage {
	t.Helper()
	buf := make([]byte, 8, 64)
	if ttl > 0 {
		binary.LittleEndian.PutUint64(buf, uint64(time.Now().Add(ttl).UnixMilli()))
	}
	return decode(t, encode(t, buf[:7], v))
}

// Array returns the elements of the array reply [Msg] builds of vs, for decoders that take the
// reply's []rueidis.RedisMessage.
func Array(t testing.TB, vs ...any) []rueidis.RedisMessage {
	t.Helper()
	m := Msg(t, vs)
	arr, err := m.ToArray()
	if err != nil {
		t.Fatalf("replytest: array of %v: %v", vs, err)
	}
	return arr
}

// Error returns the error of a server error reply whose text is s (such as "NOPERM User app has no
// permissions to run the 'del' command" or "LOADING ..."), a *rueidis.RedisError exactly as rueidis
// returns it for that reply. It fails t if rueidis cannot decode the reply. Safe for concurrent use.
func Error(t testing.TB, s string) error {
	t.Helper()
	m := decode(t, appendValue(make([]byte, 7), '-', uint64(len(s)), s))
	return m.Error()
}

// encode appends v in rueidis' cache serialization: the type byte, a length or an integer as 8
// big-endian bytes, then a string's bytes or an array's elements.
func encode(t testing.TB, buf []byte, v any) []byte {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return appendValue(buf, '_', 0, "")
	case int:
		return appendValue(buf, ':', uint64(x), "")
	case int64:
		return appendValue(buf, ':', uint64(x), "")
	case string:
		return appendValue(buf, '$', uint64(len(x)), x)
	case Status:
		return appendValue(buf, '+', uint64(len(x)), string(x))
	case []any:
		buf = appendValue(buf, '*', uint64(len(x)), "")
		for _, e := range x {
			buf = encode(t, buf, e)
		}
		return buf
	}
	t.Fatalf("replytest: cannot encode %T as a reply", v)
	return nil
}

func appendValue(buf []byte, typ byte, n uint64, s string) []byte {
	return append(binary.BigEndian.AppendUint64(append(buf, typ), n), s...)
}

// decode reads buf, 7 bytes of cache expiry then one encoded value, as rueidis' cache does.
func decode(t testing.TB, buf []byte) rueidis.RedisMessage {
	t.Helper()
	var m rueidis.RedisMessage
	if err := m.CacheUnmarshalView(buf); err != nil {
		t.Fatalf("replytest: decode reply: %v", err)
	}
	return m
}

// Client is a standalone rueidis.Client whose Do answers every command with Err and records it; every
// other method of rueidis.Client panics (the embedded interface is nil). It stands in for a server
// that fails every call, in unit tests of what a primitive sends after a failure. The zero value
// answers with a nil-error result. Safe for concurrent use.
type Client struct {
	rueidis.Client
	// Err is the error of every reply.
	Err  error
	mu   sync.Mutex
	cmds [][]string
}

// Mode returns rueidis.ClientModeStandalone.
func (c *Client) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }

// B returns rueidis' zero Builder, which accepts only keys of hash slot 0 in commands built with Key
// (scripts' keys passed as arguments are not checked).
func (c *Client) B() rueidis.Builder { return rueidis.Builder{} }

// Do records cmd's words and returns a result carrying Err. It never blocks; ctx is not used.
func (c *Client) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, append([]string(nil), cmd.Commands()...))
	return rueidis.NewErrorResult(c.Err)
}

// Sent returns a copy of the commands Do received, in order, each as its words.
func (c *Client) Sent() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]string(nil), c.cmds...)
}

// NoIO is a rueidis.Client whose every method except Mode panics (the embedded interface is nil):
// a unit test passes it to prove that the code under test rejects bad input, or decides, before any
// I/O. Mode reports ClientMode, rueidis.ClientModeStandalone when it is empty. ID only tells stubs
// apart (NoIO values are equal when their fields are), for code that refuses one client given twice.
type NoIO struct {
	rueidis.Client
	ClientMode rueidis.ClientMode
	ID         int
}

// Mode returns c.ClientMode, or rueidis.ClientModeStandalone when it is empty.
func (c NoIO) Mode() rueidis.ClientMode {
	if c.ClientMode == "" {
		return rueidis.ClientModeStandalone
	}
	return c.ClientMode
}

// Runs reports whether cmd, a command's words as [Client.Sent] records them, runs script s: EVAL or
// EVAL_RO of its source, or EVALSHA or EVALSHA_RO of its digest (known once a server has reported it;
// see luakit.Script).
func Runs(cmd []string, s *luakit.Script) bool {
	if len(cmd) < 2 {
		return false
	}
	switch cmd[0] {
	case "EVAL", "EVAL_RO":
		return cmd[1] == s.Source()
	case "EVALSHA", "EVALSHA_RO":
		return cmd[1] != "" && cmd[1] == s.SHA1()
	}
	return false
}

// FailedWrite is one case of [FailedWrites].
type FailedWrite struct {
	Name string
	// Err is the failed call's error.
	Err error
	// Applied is luakit.MayHaveApplied(Err): whether an owner-checked cleanup is owed behind the call.
	Applied bool
}

// FailedWrites returns the failures a write can meet, with whether each may have been applied: an
// ACL refusal and a transient reply (error replies: the script stopped before its first write), no
// reply (io.ErrUnexpectedEOF) and an error of unknown kind. Primitives' unit tests run their
// acquisition against each and check that a cleanup follows exactly the applied ones.
func FailedWrites(t testing.TB) []FailedWrite {
	t.Helper()
	return []FailedWrite{
		{"noperm", Error(t, "NOPERM User app has no permissions to run the 'del' command"), false},
		{"transient", Error(t, "LOADING Redis is loading the dataset in memory"), false},
		{"no reply", io.ErrUnexpectedEOF, true},
		{"unknown", errors.New("boom"), true},
	}
}
