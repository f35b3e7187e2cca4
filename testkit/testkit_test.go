package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTargetsEnv(t *testing.T) {
	t.Setenv(EnvTargets, "")
	assert.Equal(t, AllTargets(), Targets())
	assert.Equal(t, []Target{Redis70, Redis8, Valkey8, Valkey9}, AllTargets())

	t.Setenv(EnvTargets, " redis8, Valkey9 ,redis8,,")
	assert.Equal(t, []Target{Redis8, Valkey9}, Targets())

	t.Setenv(EnvTargets, "all")
	assert.Equal(t, AllTargets(), Targets())

	t.Setenv(EnvTargets, " , ")
	assert.Equal(t, AllTargets(), Targets())

	t.Setenv(EnvTargets, "redis70,nosuch")
	assert.Equal(t, []Target{Redis70, "nosuch"}, Targets())

	assert.Equal(t, FlavorRedis, Redis8.Flavor())
	assert.Equal(t, FlavorValkey, Valkey9.Flavor())
	assert.Equal(t, Flavor(""), Target("nosuch").Flavor())
	assert.False(t, Target("nosuch").Known())
}

func writeFakeServer(t *testing.T, path, version string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	script := "#!/bin/sh\necho \"Redis server v=" + version + " sha=00000000:0 malloc=libc bits=64 build=0\"\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
}

func TestBinary(t *testing.T) {
	t.Setenv(EnvAllowPathServer, "")
	emptyPath := t.TempDir()
	t.Setenv("PATH", emptyPath)

	t.Run("missing from an existing cache", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv(EnvServerCache, cache)
		_, err := Binary(Redis8)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrUnavailable)
		msg := err.Error()
		assert.Contains(t, msg, "run make setup")
		assert.Contains(t, msg, filepath.Join(cache, "redis8", "bin", "redis-server"))
		assert.Contains(t, msg, "scripts/servers.sh redis8")
		assert.Contains(t, msg, EnvAllowPathServer)
		assert.Contains(t, msg, EnvRedisURL)

		_, err = Binary(Valkey9)
		require.Error(t, err)
		assert.Contains(t, err.Error(), filepath.Join(cache, "valkey9", "bin", "valkey-server"))
	})

	t.Run("unknown target", func(t *testing.T) {
		_, err := Binary("nosuch")
		assert.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), `unknown target "nosuch"`)
	})

	t.Run("cached", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv(EnvServerCache, cache)
		want := filepath.Join(cache, "valkey8", "bin", "valkey-server")
		writeFakeServer(t, want, "8.0.1")
		got, err := Binary(Valkey8)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})

	t.Run("PATH when there is no cache dir", func(t *testing.T) {
		t.Setenv(EnvServerCache, filepath.Join(t.TempDir(), "never-made"))
		bin := t.TempDir()
		t.Setenv("PATH", bin)
		writeFakeServer(t, filepath.Join(bin, "redis-server"), "7.0.15")

		got, err := Binary(Redis70)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(bin, "redis-server"), got)

		_, err = Binary(Redis8) // a 7.0 binary never stands in for Redis 8
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "version 7.0.15")
		assert.Contains(t, err.Error(), "run make setup")

		_, err = Binary(Valkey8)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "no valkey-server on PATH")
	})

	t.Run("PATH only with COORDKIT_ALLOW_PATH_SERVER=1 when the cache dir exists", func(t *testing.T) {
		t.Setenv(EnvServerCache, t.TempDir())
		bin := t.TempDir()
		t.Setenv("PATH", bin)
		writeFakeServer(t, filepath.Join(bin, "redis-server"), "8.0.6")
		_, err := Binary(Redis8)
		require.ErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "PATH not searched")

		t.Setenv(EnvAllowPathServer, "1")
		got, err := Binary(Redis8)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(bin, "redis-server"), got)
	})
}

func TestCacheDir(t *testing.T) {
	t.Setenv(EnvServerCache, "/x/cache")
	assert.Equal(t, "/x/cache", CacheDir())
	t.Setenv(EnvServerCache, "")
	t.Setenv("XDG_CACHE_HOME", "/x/xdg")
	assert.Equal(t, "/x/xdg/coordkit/servers", CacheDir())
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/x/home")
	assert.Equal(t, "/x/home/.cache/coordkit/servers", CacheDir())
}

func TestStartSkipsUnavailable(t *testing.T) {
	t.Setenv(EnvCI, "")
	t.Setenv(EnvRedisURL, "")
	var skipped bool
	var reason string
	t.Run("unknown", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Start(&recordingTB{T: t, skipMsg: &reason}, "nosuch")
	})
	assert.True(t, skipped)
	assert.Contains(t, reason, `unknown target "nosuch"`)
}

// recordingTB records the Skip message and then skips.
type recordingTB struct {
	*testing.T
	skipMsg *string
}

func (r *recordingTB) Skipf(format string, args ...any) {
	*r.skipMsg = strings.TrimSpace(fmt.Sprintf(format, args...))
	r.T.Skipf(format, args...)
}

func TestParseCommandStats(t *testing.T) {
	got, err := parseCommandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_client|id:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_GET:calls=7,usec=1,usec_per_call=0.14,rejected_calls=0,failed_calls=0\r\n")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"evalsha": 12, "client|id": 2, "get": 7}, got)

	_, err = parseCommandStats("cmdstat_get:calls=x,usec=1\r\n")
	assert.Error(t, err)
}

func TestFlavorVersion(t *testing.T) {
	f, v, err := flavorVersion(parseInfo("# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.0.0\r\n"))
	require.NoError(t, err)
	assert.Equal(t, FlavorValkey, f)
	assert.Equal(t, "9.0.0", v)

	f, v, err = flavorVersion(parseInfo("# Server\r\nredis_version:8.0.6\r\n"))
	require.NoError(t, err)
	assert.Equal(t, FlavorRedis, f)
	assert.Equal(t, "8.0.6", v)

	_, _, err = flavorVersion(parseInfo("# Server\r\n"))
	assert.True(t, err != nil && !errors.Is(err, ErrUnavailable))
}

func TestSlotsCovered(t *testing.T) {
	n, err := slotsCovered([]any{
		[]any{int64(0), int64(5460), []any{"127.0.0.1", int64(1), "id"}},
		[]any{int64(5461), int64(10921), []any{"127.0.0.1", int64(2), "id"}},
	})
	require.NoError(t, err)
	assert.Equal(t, 10922, n)
	_, err = slotsCovered([]any{[]any{int64(0), int64(ClusterSlots), []any{}}})
	assert.Error(t, err)
}
