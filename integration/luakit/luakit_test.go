// Package luakit_test checks luakit against the real server matrix: the feature probe agrees with what
// each server really supports (by command, not by version string: Valkey 9 reports
// redis_version:7.2.4 yet has HPEXPIRE), testkit records the real flavor and version, and scripts fall
// back from EVALSHA to EVAL after the script cache is flushed.
package luakit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}

// expected is what each target really is and supports.
var expected = map[testkit.Target]struct {
	flavor       testkit.Flavor
	versionMajor string
	hashFieldTTL bool
}{
	testkit.Redis70: {testkit.FlavorRedis, "7.0.", false},
	testkit.Redis8:  {testkit.FlavorRedis, "8.", true},
	testkit.Valkey8: {testkit.FlavorValkey, "8.", false},
	testkit.Valkey9: {testkit.FlavorValkey, "9.", true},
}

var echoKey = luakit.NewScript("echo_key", "return {KEYS[1], ARGV[1]}")

func TestLuakit(t *testing.T) {
	for _, mt := range matrix.Targets() {
		t.Run(mt.Name, func(t *testing.T) {
			t.Parallel()
			want, ok := expected[mt.Server]
			if !ok {
				t.Fatalf("no expectation for target %s", mt.Server)
			}
			var (
				client  rueidis.Client
				flavor  testkit.Flavor
				version string
				flush   func(ctx context.Context) error
			)
			if mt.Cluster {
				c := testkit.StartCluster(t, mt.Server)
				client, flavor, version = c.Client(t), c.Flavor, c.Version
				flush = func(ctx context.Context) error {
					for _, n := range c.Nodes {
						if _, err := n.Do(ctx, "SCRIPT", "FLUSH"); err != nil {
							return err
						}
					}
					return nil
				}
			} else {
				s := testkit.Start(t, mt.Server)
				client, flavor, version = s.Client(t), s.Flavor, s.Version
				flush = func(ctx context.Context) error { _, err := s.Do(ctx, "SCRIPT", "FLUSH"); return err }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			t.Run("flavor_and_version", func(t *testing.T) {
				require.Equal(t, want.flavor, flavor)
				require.True(t, strings.HasPrefix(version, want.versionMajor), "version %q, want %s*", version, want.versionMajor)
			})

			t.Run("probe_hash_field_ttl", func(t *testing.T) {
				got, err := luakit.Probe(ctx, client, luakit.HashFieldTTL)
				require.NoError(t, err)
				require.Equal(t, want.hashFieldTTL, got, "%s %s: HPEXPIRE support", flavor, version)
				var fc luakit.FeatureCache
				err = fc.Require(ctx, client, luakit.HashFieldTTL)
				if want.hashFieldTTL {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, luakit.ErrUnsupported)
					var ue *luakit.UnsupportedError
					require.True(t, errors.As(err, &ue))
					require.Contains(t, err.Error(), "Redis 7.4 or Valkey 9.0")
				}
			})

			t.Run("evalsha_falls_back_after_flush", func(t *testing.T) {
				key := "{luakit}:\x00bin\xff"
				for i := 0; i < 2; i++ {
					vals, err := echoKey.Exec(ctx, client, []string{key}, []string{"v"}).AsStrSlice()
					require.NoError(t, err)
					require.Equal(t, []string{key, "v"}, vals)
					require.NoError(t, flush(ctx))
				}
			})

			t.Run("int64_above_2_53", func(t *testing.T) {
				key := "{luakit}:int"
				require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value("9007199254740994").Build()).Error())
				incr := luakit.NewScript("incr_get", "redis.call('INCR', KEYS[1]) return redis.call('GET', KEYS[1])")
				m, err := incr.Exec(ctx, client, []string{key}, nil).ToMessage()
				require.NoError(t, err)
				n, err := luakit.Int64(m)
				require.NoError(t, err)
				require.EqualValues(t, int64(9007199254740995), n)
			})
		})
	}
}
