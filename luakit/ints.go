package luakit

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// ErrMalformedInt is wrapped by every error of [ParseInt64] and [Int64]
// for a reply that is not a canonical 64-bit decimal integer.
var ErrMalformedInt = errors.New("luakit: malformed integer")

// ParseInt64 parses s strictly as the canonical decimal form of an int64:
// an optional '-', then digits, with no '+', no spaces, no leading zeros
// (except "0" itself), no "-0", and a value within [math.MinInt64,
// math.MaxInt64]. It accepts exactly the strings FormatInt64 produces, so
// ParseInt64(s) succeeds iff FormatInt64(v) == s for the returned v.
//
// Redis Lua numbers are doubles, exact only up to 2^53; scripts therefore
// return 64-bit values (fencing tokens, counters) as decimal strings, for
// example redis.call('GET', k) after an INCR (returning the INCR reply, or
// tostring of a Lua number, rounds above 2^53), and Go parses them here. Errors wrap ErrMalformedInt and quote at most 32 bytes of s.
func ParseInt64(s string) (int64, error) {
	if !canonicalInt(s) {
		return 0, malformed(s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // only out-of-range is possible here
		return 0, fmt.Errorf("%w: %q out of int64 range", ErrMalformedInt, clip(s))
	}
	return v, nil
}

func canonicalInt(s string) bool {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
		if d == "0" {
			return false
		}
	}
	if d == "" || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

func malformed(s string) error {
	return fmt.Errorf("%w: %q is not a canonical decimal int64", ErrMalformedInt, clip(s))
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// FormatInt64 returns the canonical decimal form of v (strconv.FormatInt(v,
// 10)), the form to pass 64-bit values to a script in ARGV and the only
// form ParseInt64 accepts.
func FormatInt64(v int64) string { return strconv.FormatInt(v, 10) }

// Int64 decodes a reply that carries a 64-bit integer: a RESP integer is
// returned as is; a bulk or simple string is parsed with ParseInt64 (the
// form scripts use for values above 2^53). A nil reply returns rueidis.Nil
// (test with rueidis.IsRedisNil), an error reply returns its
// *rueidis.RedisError, and any other type (double, array, map, boolean)
// returns an error wrapping ErrMalformedInt.
func Int64(m rueidis.RedisMessage) (int64, error) {
	if err := m.Error(); err != nil {
		return 0, err
	}
	switch {
	case m.IsInt64():
		return m.ToInt64()
	case m.IsString():
		s, err := m.ToString()
		if err != nil {
			return 0, err
		}
		return ParseInt64(s)
	}
	return 0, fmt.Errorf("%w: reply is not an integer or string", ErrMalformedInt)
}
