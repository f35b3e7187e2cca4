package luakit

import (
	"encoding/binary"
	"testing"

	"github.com/redis/rueidis"
)

// luakit's own tests cannot import replytest (it imports luakit): msg and arrayMsg are the one local
// copy of replytest.Msg's encoding, rueidis' cache format, since rueidis has no exported constructor.

// msg builds a rueidis.RedisMessage of RESP type typ ('$', '+', '-', ':', '_', '#') holding s, or n
// for the types that carry a number.
func msg(t testing.TB, typ byte, s string, n int64) rueidis.RedisMessage {
	t.Helper()
	return decodeMsg(t, appendMsg(make([]byte, 7), typ, s, n))
}

// arrayMsg builds an array reply of integers (int) and bulk strings.
func arrayMsg(t testing.TB, elems ...any) rueidis.RedisMessage {
	t.Helper()
	buf := appendMsg(make([]byte, 7), '*', "", int64(len(elems)))
	for _, e := range elems {
		switch x := e.(type) {
		case int:
			buf = appendMsg(buf, ':', "", int64(x))
		case string:
			buf = appendMsg(buf, '$', x, 0)
		default:
			t.Fatalf("cannot encode %T", e)
		}
	}
	return decodeMsg(t, buf)
}

func appendMsg(buf []byte, typ byte, s string, n int64) []byte {
	switch typ {
	case ':', '_', '#', '*':
		return binary.BigEndian.AppendUint64(append(buf, typ), uint64(n))
	}
	return append(binary.BigEndian.AppendUint64(append(buf, typ), uint64(len(s))), s...)
}

func decodeMsg(t testing.TB, buf []byte) rueidis.RedisMessage {
	t.Helper()
	var m rueidis.RedisMessage
	if err := m.CacheUnmarshalView(buf); err != nil {
		t.Fatal(err)
	}
	return m
}

func str(t testing.TB, s string) rueidis.RedisMessage { return msg(t, '$', s, 0) }

func redisErr(t testing.TB, s string) error {
	t.Helper()
	m := msg(t, '-', s, 0)
	return m.Error()
}
