package luakit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// Scripts that call the prelude's functions as the modules' scripts do.
var (
	fenceRead = luakit.NewScript("fence_read", luakit.WithPrelude(
		"local v, r = luakit_fence_read(KEYS[1])\nreturn {v or '', r or ''}\n"))
	fenceNext = luakit.NewScript("fence_next", luakit.WithPrelude(
		"local v, r = luakit_fence_next(KEYS[1])\nif type(r) == 'table' then return r end\n"+
			"if r == 'wrongtype' then return {'', r, '', -1} end\n"+
			"return {v or '', r or '', redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}\n"))
	keyType  = luakit.NewScript("type", luakit.WithPrelude("return luakit_type(KEYS[1], ARGV[1])\n"))
	delOwned = luakit.NewScript("del_owned", luakit.WithPrelude("return luakit_del_owned(KEYS[1], ARGV[1])\n"))
	nowBoth  = luakit.NewScript("now", luakit.WithPrelude(
		"local a = redis.call('TIME')\nlocal ms, us = luakit_now_ms(), luakit_now_us()\n"+
			"local b = redis.call('TIME')\nreturn {ms, us, a[1], a[2], b[1], b[2]}\n"))
)

// TestPrelude runs the prelude's functions on every standalone target: the fence counter's checks with
// every guard (the read check and the token issue), the key-type check, the owner-checked delete, and
// the server time.
func TestPrelude(t *testing.T) {
	for _, mt := range matrix.Targets() {
		if mt.Cluster {
			continue // the functions do not depend on the topology
		}
		t.Run(mt.Name, func(t *testing.T) {
			t.Parallel()
			matrix.TakeSlot(t)
			s := testkit.Start(t, mt.Server)
			c := s.Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// set stores v at k ("" deletes k; a "list:" prefix stores a list; ttl > 0 adds an expiry).
			set := func(t *testing.T, k, v string, ttl time.Duration) {
				t.Helper()
				_, err := s.Do(ctx, "DEL", k)
				require.NoError(t, err)
				switch {
				case v == "":
				case v == "list:":
					_, err = s.Do(ctx, "RPUSH", k, "x")
				case ttl > 0:
					_, err = s.Do(ctx, "SET", k, v, "PX", "60000")
				default:
					_, err = s.Do(ctx, "SET", k, v)
				}
				require.NoError(t, err)
			}

			t.Run("fence_read", func(t *testing.T) {
				for _, tc := range []struct {
					name, stored string
					ttl          time.Duration
					value        string
					reason       string
				}{
					{"absent", "", 0, "0", ""},
					{"zero", "0", 0, "0", ""},
					{"above 2^53", "9007199254740995", 0, "9007199254740995", ""},
					{"maximum", "9223372036854775807", 0, "9223372036854775807", ""},
					{"beyond int64", "9223372036854775808", 0, "", "malformed"},
					{"twenty digits", "10000000000000000000", 0, "", "malformed"},
					{"negative", "-1", 0, "", "negative"},
					{"minimum", "-9223372036854775808", 0, "", "negative"},
					{"minus zero", "-0", 0, "", "malformed"},
					{"leading zero", "07", 0, "", "malformed"},
					{"text", "abc", 0, "", "malformed"},
					{"expiring", "5", time.Minute, "", "expiring"},
					{"expiring and malformed", "abc", time.Minute, "", "expiring"},
					{"wrong type", "list:", 0, "", "wrongtype"},
				} {
					t.Run(tc.name, func(t *testing.T) {
						set(t, "fence", tc.stored, tc.ttl)
						arr, err := fenceRead.Exec(ctx, c, []string{"fence"}, nil).ToArray()
						require.NoError(t, err)
						v, _ := arr[0].ToString()
						r, _ := arr[1].ToString()
						require.Equal(t, [2]string{tc.value, tc.reason}, [2]string{v, r})
					})
				}
			})

			t.Run("fence_next", func(t *testing.T) {
				for _, tc := range []struct {
					name, stored string
					ttl          time.Duration
					token        int64 // 0: refused
					reason       string
				}{
					{"absent", "", 0, 1, ""},
					{"above 2^53, odd successor", "9007199254740994", 0, 9007199254740995, ""},
					{"maximum", "9223372036854775807", 0, 0, "overflow"},
					{"negative", "-1", 0, 0, "negative"},
					{"minimum", "-9223372036854775808", 0, 0, "negative"},
					{"malformed", "07", 0, 0, "malformed"},
					{"expiring", "5", time.Minute, 0, "expiring"},
					{"expiring at the maximum", "9223372036854775807", time.Minute, 0, "expiring"},
					{"wrong type", "list:", 0, 0, "wrongtype"},
				} {
					t.Run(tc.name, func(t *testing.T) {
						set(t, "fence", tc.stored, tc.ttl)
						arr, err := fenceNext.Exec(ctx, c, []string{"fence"}, nil).ToArray()
						require.NoError(t, err)
						r, _ := arr[1].ToString()
						require.Equal(t, tc.reason, r)
						if tc.token != 0 {
							got, err := luakit.Int64(arr[0])
							require.NoError(t, err)
							require.Equal(t, tc.token, got)
							return
						}
						if tc.stored == "list:" {
							return
						}
						// Refused: the counter is as it was, its TTL kept.
						v, _ := arr[2].ToString()
						require.Equal(t, tc.stored, v)
						pttl, _ := arr[3].AsInt64()
						require.Equal(t, tc.ttl > 0, pttl > 0, "pttl %d", pttl)
					})
				}
			})

			t.Run("type", func(t *testing.T) {
				for _, tc := range []struct {
					name, stored, want string
					status             int64
				}{
					{"absent", "", "string", luakit.StatusAbsent},
					{"string", "v", "string", luakit.StatusOK},
					{"list", "list:", "list", luakit.StatusOK},
					{"string, hash wanted", "v", "hash", luakit.StatusForeign},
					{"list, string wanted", "list:", "string", luakit.StatusForeign},
				} {
					t.Run(tc.name, func(t *testing.T) {
						set(t, "typed", tc.stored, 0)
						n, err := keyType.Exec(ctx, c, []string{"typed"}, []string{tc.want}).AsInt64()
						require.NoError(t, err)
						require.Equal(t, tc.status, n)
					})
				}
			})

			t.Run("del_owned", func(t *testing.T) {
				set(t, "lease", "", 0)
				n, err := delOwned.Exec(ctx, c, []string{"lease"}, []string{"me"}).AsInt64()
				require.NoError(t, err)
				require.Equal(t, luakit.StatusAbsent, n)
				set(t, "lease", "other", 0)
				n, err = delOwned.Exec(ctx, c, []string{"lease"}, []string{"me"}).AsInt64()
				require.NoError(t, err)
				require.Equal(t, luakit.StatusNotOwner, n)
				v, err := s.Do(ctx, "GET", "lease")
				require.NoError(t, err)
				got, _ := v.ToString()
				require.Equal(t, "other", got, "another owner's lease is left alone")
				set(t, "lease", "me", 0)
				n, err = delOwned.Exec(ctx, c, []string{"lease"}, []string{"me"}).AsInt64()
				require.NoError(t, err)
				require.Equal(t, luakit.StatusOK, n)
				e, err := s.Do(ctx, "EXISTS", "lease")
				require.NoError(t, err)
				ex, _ := e.AsInt64()
				require.Zero(t, ex)
			})

			t.Run("now", func(t *testing.T) {
				arr, err := nowBoth.Exec(ctx, c, nil, nil).ToArray()
				require.NoError(t, err)
				v := make([]int64, len(arr))
				for i := range arr {
					v[i], err = arr[i].AsInt64()
					require.NoError(t, err)
				}
				ms, us := v[0], v[1]
				// TIME can move during a script (it does on Redis 7.0), so
				// each value lies between the TIME read before and after.
				before, after := v[2]*1000000+v[3], v[4]*1000000+v[5]
				require.True(t, before <= us && us <= after, "µs %d outside [%d, %d]", us, before, after)
				require.True(t, before/1000 <= ms && ms <= after/1000, "ms %d outside [%d, %d]", ms, before/1000, after/1000)
			})
		})
	}
}
