package latch

import (
	"encoding/binary"

	"github.com/redis/rueidis"
)

// strMsg builds a bulk-string rueidis.RedisMessage through the exported cache (un)marshal format,
// since rueidis has no exported constructor (as luakit's tests do).
func strMsg(s string) rueidis.RedisMessage {
	buf := make([]byte, 7, 7+9+len(s))
	buf = append(buf, '$')
	var l [8]byte
	binary.BigEndian.PutUint64(l[:], uint64(len(s)))
	buf = append(buf, l[:]...)
	buf = append(buf, s...)
	var m rueidis.RedisMessage
	if err := m.CacheUnmarshalView(buf); err != nil {
		panic(err)
	}
	return m
}
