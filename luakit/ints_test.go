package luakit

import (
	"strconv"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseInt64(t *testing.T) {
	t.Parallel()
	ok := map[string]int64{
		"0":                    0,
		"1":                    1,
		"-1":                   -1,
		"9007199254740993":     9007199254740993, // 2^53+1: not a double
		"9007199254740995":     9007199254740995,
		"9223372036854775807":  9223372036854775807,
		"-9223372036854775808": -9223372036854775808,
	}
	for s, want := range ok {
		got, err := ParseInt64(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
		assert.Equal(t, s, FormatInt64(got))
	}
	for _, s := range []string{"", "-", "+1", "01", "00", "-01", "-0", " 1", "1 ", "1.0", "1e3",
		"9223372036854775808", "-9223372036854775809", "99999999999999999999", "abc", "0x10", "1_000", "١"} {
		_, err := ParseInt64(s)
		require.ErrorIs(t, err, ErrMalformedInt, "%q", s)
		assert.True(t, IsTerminal(err))
	}
	_, err := ParseInt64("1234567890123456789012345678901234567890")
	assert.Contains(t, err.Error(), "...")
	assert.NotContains(t, err.Error(), "1234567890123456789012345678901234567890")
}

func TestInt64(t *testing.T) {
	t.Parallel()
	v, err := Int64(msg(t, ':', "", -42))
	require.NoError(t, err)
	assert.Equal(t, int64(-42), v)

	v, err = Int64(str(t, "9007199254740995"))
	require.NoError(t, err)
	assert.Equal(t, int64(9007199254740995), v)

	v, err = Int64(msg(t, '+', "7", 0))
	require.NoError(t, err)
	assert.Equal(t, int64(7), v)

	_, err = Int64(str(t, "9007199254740995.0"))
	require.ErrorIs(t, err, ErrMalformedInt)

	_, err = Int64(msg(t, '_', "", 0))
	assert.True(t, rueidis.IsRedisNil(err))

	_, err = Int64(msg(t, '-', "WRONGTYPE x", 0))
	_, isRedis := rueidis.IsRedisErr(err)
	assert.True(t, isRedis)

	_, err = Int64(msg(t, '#', "", 1))
	require.ErrorIs(t, err, ErrMalformedInt)
}

func FuzzParseInt64(f *testing.F) {
	for _, s := range []string{"0", "-0", "01", "+1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", " 1", "1.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseInt64(s)
		want, serr := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if v != 0 {
				t.Fatalf("ParseInt64(%q) = %d with error", s, v)
			}
			return
		}
		if serr != nil {
			t.Fatalf("ParseInt64 accepted %q which strconv rejects: %v", s, serr)
		}
		if v != want || strconv.FormatInt(v, 10) != s || FormatInt64(v) != s {
			t.Fatalf("ParseInt64(%q) = %d, not a round trip", s, v)
		}
	})
}

func FuzzFormatInt64(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(-1))
	f.Add(int64(9007199254740995))
	f.Fuzz(func(t *testing.T, v int64) {
		got, err := ParseInt64(FormatInt64(v))
		if err != nil || got != v {
			t.Fatalf("round trip of %d: %d, %v", v, got, err)
		}
	})
}
