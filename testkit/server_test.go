package testkit

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func requireProcess(t *testing.T, s *Server) {
	t.Helper()
	if s.Backend != BackendProcess {
		t.Skipf("fault injection needs the process backend, have %s", s.Backend)
	}
}

func TestStartTargets(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		assert.Equal(t, target, s.Target)
		assert.NotEmpty(t, s.Version)
		assert.NotEmpty(t, s.Flavor)
		if s.Backend == BackendProcess {
			assert.Equal(t, target.Flavor(), s.Flavor)
			host, _, err := net.SplitHostPort(s.Addr)
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", host)
			assert.Positive(t, s.PID())
		}
		t.Logf("%s: %s %s at %s (%s)", target, s.Flavor, s.Version, s.Addr, s.Backend)

		ctx := context.Background()
		c := s.Client(t)
		pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "PONG", pong)

		msg, err := s.Do(ctx, "PING")
		require.NoError(t, err)
		pong, err = msg.ToString()
		require.NoError(t, err)
		assert.Equal(t, "PONG", pong)

		// An error reply is the error.
		_, err = s.Do(ctx, "NOSUCHCOMMAND")
		var rerr *rueidis.RedisError
		assert.ErrorAs(t, err, &rerr)
		_, err = s.Do(ctx)
		assert.Error(t, err)
	})
}

func TestPauseResume(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		requireProcess(t, s)
		c := s.Client(t)
		require.NoError(t, c.Do(context.Background(), c.B().Ping().Build()).Error())

		require.NoError(t, s.Pause())
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Do(ctx, c.B().Ping().Build()).Error()
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)

		require.NoError(t, s.Resume())
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())

		// Closing a paused server does not wait for the SIGKILL grace period.
		require.NoError(t, s.Pause())
		start := time.Now()
		require.NoError(t, s.Close())
		assert.Less(t, time.Since(start), 3*time.Second)
		require.NoError(t, s.Close()) // idempotent
		assert.Zero(t, s.PID())
	})
}

func TestRestart(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		requireProcess(t, s)
		ctx := context.Background()
		addr, pid := s.Addr, s.PID()

		_, err := s.Do(ctx, "SET", "restart-key", "v")
		require.NoError(t, err)
		msg, err := s.Do(ctx, "SCRIPT", "LOAD", "return 42")
		require.NoError(t, err)
		sha, err := msg.ToString()
		require.NoError(t, err)
		msg, err = s.Do(ctx, "EVALSHA", sha, "0")
		require.NoError(t, err)
		n, _ := msg.AsInt64()
		assert.EqualValues(t, 42, n)

		require.NoError(t, s.Restart(ctx))
		assert.Equal(t, addr, s.Addr)
		assert.NotEqual(t, pid, s.PID())
		assert.Positive(t, s.PID())

		_, err = s.Do(ctx, "GET", "restart-key")
		assert.True(t, rueidis.IsRedisNil(err), "data survived the restart: %v", err)
		_, err = s.Do(ctx, "EVALSHA", sha, "0")
		var rerr *rueidis.RedisError
		require.ErrorAs(t, err, &rerr)
		assert.True(t, rerr.IsNoScript(), "want NOSCRIPT, got %v", err)

		// A client made before the restart reconnects to the same address.
		c := s.Client(t)
		require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())
	})
}

func TestKill(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		requireProcess(t, s)
		require.NoError(t, s.Kill())
		assert.Zero(t, s.PID())
		_, err := net.DialTimeout("tcp", s.Addr, time.Second)
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "want connection refused, got %v", err)
		require.NoError(t, s.Kill()) // nothing to kill
		assert.Error(t, s.Pause())

		// Restart after Kill brings it back on the same address.
		require.NoError(t, s.Restart(context.Background()))
		_, err = s.Do(context.Background(), "PING")
		require.NoError(t, err)
	})
}

func TestCommandStats(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		ctx := context.Background()
		c := s.Client(t)
		key := "commandstats-" + strconv.FormatInt(time.Now().UnixNano(), 10)

		before, err := CommandStats(ctx, c)
		require.NoError(t, err)
		for range 3 {
			require.NoError(t, c.Do(ctx, c.B().Incr().Key(key).Build()).Error())
		}
		after, err := CommandStats(ctx, c)
		require.NoError(t, err)
		assert.EqualValues(t, 3, after["incr"]-before["incr"])
		assert.EqualValues(t, 1, after["info"]-before["info"]) // the first snapshot's INFO

		viaServer, err := s.CommandStats(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, after["incr"], viaServer["incr"])
	})
}

func TestLaunchUnavailable(t *testing.T) {
	t.Parallel()
	_, err := launchWith(context.Background(), processBackend{}, "nosuch")
	assert.ErrorIs(t, err, ErrUnavailable)
}

func TestLaunchBadArgsReportsLog(t *testing.T) {
	t.Parallel()
	target := firstAvailable(t)
	_, err := launchWith(context.Background(), processBackend{}, target, WithArgs("--no-such-directive", "1"), WithStartTimeout(5*time.Second))
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrUnavailable)
	assert.Contains(t, err.Error(), "exited during start")
	assert.Contains(t, err.Error(), "no-such-directive") // from the server's own output
}
