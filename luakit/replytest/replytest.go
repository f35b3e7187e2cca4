// Package replytest builds server replies for unit tests of code that classifies or decodes rueidis
// results without a server, such as a fake client that answers every command with an error reply.
// Behaviour tests run against real servers (see testkit); this package only gives such fakes a reply
// that luakit.Classify sees as the server's.
package replytest

import (
	"encoding/binary"
	"testing"

	"github.com/redis/rueidis"
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
