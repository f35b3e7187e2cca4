package luakit

import (
	"encoding/binary"
	"testing"

	"github.com/redis/rueidis"
)

// msg builds a rueidis.RedisMessage of RESP type typ ('$', '+', '-', ':',
// '_') through the exported cache (un)marshal format, since rueidis has no
// exported constructor.
func msg(t testing.TB, typ byte, s string, n int64) rueidis.RedisMessage {
	t.Helper()
	buf := make([]byte, 7, 7+9+len(s))
	buf = append(buf, typ)
	var l [8]byte
	switch typ {
	case ':', '_', '#':
		binary.BigEndian.PutUint64(l[:], uint64(n))
		buf = append(buf, l[:]...)
	default:
		binary.BigEndian.PutUint64(l[:], uint64(len(s)))
		buf = append(buf, l[:]...)
		buf = append(buf, s...)
	}
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
