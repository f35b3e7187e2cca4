package testkit

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExternalBackend starts process servers, then points COORDKIT_REDIS_URL and
// COORDKIT_REDIS_CLUSTER_URL at them. (t.Setenv: not parallel.)
func TestExternalBackend(t *testing.T) {
	target := firstAvailable(t)
	ctx := context.Background()

	t.Run("standalone", func(t *testing.T) {
		p, err := launchWith(ctx, processBackend{}, target)
		require.NoError(t, err)
		defer func() { assert.NoError(t, p.Close()) }()
		_, err = p.Do(ctx, "SET", "external-key", "v")
		require.NoError(t, err)

		t.Setenv(EnvRedisURL, "redis://"+p.Addr)
		s := Start(t, target)
		assert.Equal(t, BackendExternal, s.Backend)
		assert.Equal(t, p.Addr, s.Addr)
		assert.Equal(t, p.Flavor, s.Flavor)
		assert.Equal(t, p.Version, s.Version)
		assert.Zero(t, s.PID())

		c := s.Client(t)
		got, err := c.Do(ctx, c.B().Get().Key("external-key").Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "v", got)

		for name, f := range map[string]func() error{
			"Pause": s.Pause, "Resume": s.Resume, "Kill": s.Kill,
			"Restart": func() error { return s.Restart(ctx) },
		} {
			err := f()
			assert.ErrorIs(t, err, ErrUnsupported, name)
			assert.ErrorContains(t, err, "not supported on external backend", name)
		}
		require.NoError(t, s.Close())
		// Closing the external server left the real one running.
		_, err = p.Do(ctx, "PING")
		require.NoError(t, err)
	})

	t.Run("cluster", func(t *testing.T) {
		p, err := launchClusterWith(ctx, processBackend{}, target)
		require.NoError(t, err)
		defer func() { assert.NoError(t, p.Close()) }()

		t.Setenv(EnvRedisClusterURL, strings.Join(p.Addrs, ", ")) // bare host:port list
		c := StartCluster(t, target)
		assert.Equal(t, p.Addrs, c.Addrs)
		assert.Equal(t, p.Version, c.Version)
		for _, n := range c.Nodes {
			assert.Equal(t, BackendExternal, n.Backend)
		}
		cc := c.Client(t)
		for i := range 3 {
			key := keyOwnedBy(t, c, i)
			require.NoError(t, cc.Do(ctx, cc.B().Set().Key(key).Value("x").Build()).Error())
			got, err := cc.Do(ctx, cc.B().Get().Key(key).Build()).ToString()
			require.NoError(t, err)
			assert.Equal(t, "x", got)
		}
	})

	t.Run("unreachable fails, not skips", func(t *testing.T) {
		t.Setenv(EnvRedisURL, "127.0.0.1:1")
		_, err := Launch(ctx, target, WithStartTimeout(2e9))
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrUnavailable)
		assert.Contains(t, err.Error(), "127.0.0.1:1")
	})
}
