// Package luakit_test checks luakit against the real server matrix: the feature probe agrees with what
// each server really supports (by command, not by version string: Valkey 9 reports
// redis_version:7.2.4 yet has HPEXPIRE), testkit records the real flavor and version, and scripts fall
// back from EVALSHA to EVAL after the script cache is flushed.
package luakit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
			matrix.TakeSlot(t)
			want, ok := expected[mt.Server]
			if !ok {
				t.Fatalf("no expectation for target %s", mt.Server)
			}
			var (
				client  rueidis.Client
				opt     rueidis.ClientOption
				flavor  testkit.Flavor
				version string
				flush   func(ctx context.Context) error
				s       *testkit.Server  // standalone targets
				cluster *testkit.Cluster // Cluster targets
			)
			if mt.Cluster {
				c := testkit.StartCluster(t, mt.Server)
				cluster = c
				client, opt, flavor, version = c.Client(t), c.ClientOption(), c.Flavor, c.Version
				flush = func(ctx context.Context) error {
					for _, n := range c.Nodes {
						if _, err := n.Do(ctx, "SCRIPT", "FLUSH"); err != nil {
							return err
						}
					}
					return nil
				}
			} else {
				s = testkit.Start(t, mt.Server)
				client, opt, flavor, version = s.Client(t), s.ClientOption(), s.Flavor, s.Version
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

			t.Run("closed_client_refuses_commands", func(t *testing.T) { testCloseGuard(t, opt) })

			// pauseKey stops the server (standalone) or the key's primary (Cluster) and returns resume.
			pauseKey := func(t *testing.T, key string) func() {
				t.Helper()
				srv := s
				if mt.Cluster {
					var err error
					srv, err = cluster.PrimaryOf(ctx, testkit.KeySlot(key))
					require.NoError(t, err)
				}
				srv.MustPause(t)
				return func() { srv.MustResume(t) }
			}
			t.Run("exec_ordered_keeps_send_order", func(t *testing.T) {
				testExecOrdered(t, client, pauseKey, func(ctx context.Context, key string) error {
					return delKey.ExecOrdered(ctx, client, []string{key}, nil).Error()
				})
			})
			// A plain command (lock's DELIFEQ) after a script keeps the order the same way.
			t.Run("do_ordered_keeps_send_order", func(t *testing.T) {
				testExecOrdered(t, client, pauseKey, func(ctx context.Context, key string) error {
					return luakit.DoOrdered(ctx, client, "DEL", []string{key}).Error()
				})
			})
		})
	}
}

// testCloseGuard closes a tracked client while commands are being sent (some of them dialling one of
// its lazily connected pipelines) and checks that no command succeeds afterwards: every one fails with
// rueidis.ErrClosing. Without luakit.GuardClose rueidis v1.0.79 and v1.0.80 revived a connection whose dial was in
// flight at Close on about a third of such clients; the same race on unguarded clients is logged.
func testCloseGuard(t *testing.T, opt rueidis.ClientOption) {
	const rounds = 40
	raceClose := func(c rueidis.Client, round int) (succeeded int, firstErr error) {
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 4; j++ {
					c.Do(context.Background(), c.B().Set().Key(fmt.Sprintf("{guard%d}:%d", g, j)).Value("v").Build())
				}
			}()
		}
		time.Sleep(time.Duration(round%20) * 100 * time.Microsecond)
		c.Close()
		wg.Wait()
		time.Sleep(10 * time.Millisecond) // let a dial that was in flight at Close finish
		for j := 0; j < 30; j++ {
			err := c.Do(context.Background(), c.B().Set().Key(fmt.Sprintf("guard-after-%d", j)).Value("v").Build()).Error()
			if err == nil {
				succeeded++
			} else if firstErr == nil {
				firstErr = err
			}
		}
		return succeeded, firstErr
	}
	revived := 0
	for round := 0; round < rounds; round++ {
		c, err := luakit.NewTrackedClient(opt, luakit.NewTracker())
		require.NoError(t, err)
		require.NoError(t, c.Do(context.Background(), c.B().Ping().Build()).Error(), "guarded client works before Close")
		ok, firstErr := raceClose(c, round)
		require.Zero(t, ok, "round %d: commands succeeded on a closed guarded client", round)
		require.ErrorIs(t, firstErr, rueidis.ErrClosing)
		require.ErrorIs(t, c.Dedicated(func(rueidis.DedicatedClient) error { return nil }), rueidis.ErrClosing)
		require.ErrorIs(t, c.DoCache(context.Background(), c.B().Get().Key("guard").Cache(), time.Second).Error(), rueidis.ErrClosing)

		raw, err := rueidis.NewClient(opt)
		require.NoError(t, err)
		if ok, _ := raceClose(raw, round); ok > 0 {
			revived++
		}
	}
	t.Logf("unguarded rueidis clients that served commands after Close: %d of %d", revived, rounds)
}

var (
	setKey    = luakit.NewScript("set_key", "return redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])")
	delKey    = luakit.NewScript("del_key", "return redis.call('DEL', KEYS[1])")
	existsKey = luakit.NewScript("exists_key", "return redis.call('EXISTS', KEYS[1])")
)

// testExecOrdered: a write whose reply the caller gave up on (the server is paused) and a delete sent
// after it through ExecOrdered run on the server in that order once it resumes, on a client with
// rueidis' default connections (2^PipelineMultiplex per standalone server: 2 on 2 CPUs, 4 from 4 CPUs
// up): the key is gone every time. With Exec the two commands take random connections and the delete
// often runs first (or waits on a connection still being dialled), leaving the key.
//
// del is the delete: the delete script through ExecOrdered, or a plain DEL through DoOrdered.
func testExecOrdered(t *testing.T, client rueidis.Client, pauseKey func(*testing.T, string) func(), del func(ctx context.Context, key string) error) {
	const trials = 8
	for i := range trials {
		key := fmt.Sprintf("{luakit}:ordered:%d", i)
		// Both scripts are known to the server first, so no NOSCRIPT reply reorders anything.
		require.NoError(t, setKey.ExecOrdered(context.Background(), client, []string{key}, []string{"warm", "1"}).Error())
		require.NoError(t, del(context.Background(), key))

		resume := pauseKey(t, key)
		for _, call := range []func(ctx context.Context) error{
			func(ctx context.Context) error {
				return setKey.ExecOrdered(ctx, client, []string{key}, []string{"late", "60000"}).Error()
			},
			func(ctx context.Context) error { return del(ctx, key) },
		} {
			cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			ectx, stop := luakit.WithoutDeadline(cctx)
			err := call(ectx)
			stop()
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, "the server is paused")
		}
		resume()
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := existsKey.ExecOrdered(rctx, client, []string{key}, nil).AsInt64() // after both, in order
		cancel()
		require.NoError(t, err)
		require.Zero(t, n, "trial %d: the delete sent second must run after the late SET", i)
	}
}
