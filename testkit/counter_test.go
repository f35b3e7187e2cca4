package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandstats counting is exact for a known command sequence (issue 3, "Done when").
func TestCommandCounterExact(t *testing.T) {
	eachTarget(t, func(t *testing.T, target Target) {
		s := Start(t, target)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// No background PING from this client (the server's only other client is testkit's admin
		// client, which sends none either), and one connection, dialed before the snapshot
		// (rueidis dials its other pipelining connections lazily: HELLO, CLIENT TRACKING).
		c := s.Client(t, func(o *rueidis.ClientOption) {
			o.Dialer.KeepAlive = -1
			o.PipelineMultiplex = -1
		})
		sha, err := c.Do(ctx, c.B().ScriptLoad().Script("return KEYS[1]").Build()).ToString()
		require.NoError(t, err)

		cc, err := NewCommandCounter(ctx, c)
		require.NoError(t, err)
		require.NoError(t, c.Do(ctx, c.B().Set().Key("cc-a").Value("1").Build()).Error())
		require.NoError(t, c.Do(ctx, c.B().Set().Key("cc-b").Value("2").Build()).Error())
		v, err := c.Do(ctx, c.B().Get().Key("cc-a").Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "1", v)
		v, err = c.Do(ctx, c.B().Evalsha().Sha1(sha).Numkeys(1).Key("cc-b").Build()).ToString()
		require.NoError(t, err)
		assert.Equal(t, "cc-b", v)

		// (A command a script runs with redis.call is counted too; this script runs none.)
		want := map[string]int64{"set": 2, "get": 1, "evalsha": 1}
		d, err := cc.Delta(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, d)
		n, err := cc.Total(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 4, n)
		d, err = cc.Delta(ctx) // INFO calls of the counter never show
		require.NoError(t, err)
		assert.Equal(t, want, d)

		require.NoError(t, cc.Reset(ctx))
		d, err = cc.Delta(ctx)
		require.NoError(t, err)
		assert.Empty(t, d)
	})
}
