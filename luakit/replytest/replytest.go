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

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Error returns the error of a server error reply whose text is s (such as "NOPERM User app has no
// permissions to run the 'del' command" or "LOADING ..."), a *rueidis.RedisError exactly as rueidis
// returns it for that reply. It fails t if rueidis cannot decode the reply. Safe for concurrent use.
func Error(t testing.TB, s string) error {
	t.Helper()
	// rueidis' cache serialization of a simple error: 7 reserved bytes, the type byte, the length as
	// 8 big-endian bytes, the text.
	buf := make([]byte, 7, 16+len(s))
	var l [8]byte
	binary.BigEndian.PutUint64(l[:], uint64(len(s)))
	buf = append(append(append(buf, '-'), l[:]...), s...)
	var m rueidis.RedisMessage
	if err := m.CacheUnmarshalView(buf); err != nil {
		t.Fatalf("replytest: decode error reply %q: %v", s, err)
	}
	return m.Error()
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
