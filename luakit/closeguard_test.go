package luakit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// countingClient records which calls reach it; the behaviour against real servers is tested in
// integration/luakit (closed_client_refuses_commands).
type countingClient struct {
	rueidis.Client
	calls  map[string]int
	closed int
	nodes  map[string]rueidis.Client
}

func (c *countingClient) Do(context.Context, rueidis.Completed) rueidis.RedisResult {
	c.calls["Do"]++
	return rueidis.RedisResult{}
}

func (c *countingClient) DoMulti(_ context.Context, m ...rueidis.Completed) []rueidis.RedisResult {
	c.calls["DoMulti"]++
	return make([]rueidis.RedisResult, len(m))
}

func (c *countingClient) DoCache(context.Context, rueidis.Cacheable, time.Duration) rueidis.RedisResult {
	c.calls["DoCache"]++
	return rueidis.RedisResult{}
}

func (c *countingClient) DoMultiCache(_ context.Context, m ...rueidis.CacheableTTL) []rueidis.RedisResult {
	c.calls["DoMultiCache"]++
	return make([]rueidis.RedisResult, len(m))
}

func (c *countingClient) Receive(context.Context, rueidis.Completed, func(rueidis.PubSubMessage)) error {
	c.calls["Receive"]++
	return nil
}

func (c *countingClient) Dedicated(func(rueidis.DedicatedClient) error) error {
	c.calls["Dedicated"]++
	return nil
}

func (c *countingClient) Nodes() map[string]rueidis.Client { return c.nodes }
func (c *countingClient) Close()                           { c.closed++ }

func newCounting() *countingClient {
	return &countingClient{calls: map[string]int{}}
}

func TestGuardClose(t *testing.T) {
	require.Nil(t, GuardClose(nil))

	node := newCounting()
	inner := newCounting()
	inner.nodes = map[string]rueidis.Client{"n1": node}
	g := GuardClose(inner)
	require.Same(t, g, GuardClose(g), "guarding twice returns the same guard")

	ctx := context.Background()
	cmd := rueidis.Completed{}
	calls := []struct {
		name string
		call func(c rueidis.Client) error
	}{
		{"Do", func(c rueidis.Client) error { return c.Do(ctx, cmd).Error() }},
		{"DoMulti", func(c rueidis.Client) error { return c.DoMulti(ctx, cmd, cmd)[1].Error() }},
		{"DoCache", func(c rueidis.Client) error { return c.DoCache(ctx, rueidis.Cacheable{}, time.Second).Error() }},
		{"DoMultiCache", func(c rueidis.Client) error {
			return c.DoMultiCache(ctx, rueidis.CT(rueidis.Cacheable{}, time.Second))[0].Error()
		}},
		{"Receive", func(c rueidis.Client) error { return c.Receive(ctx, cmd, nil) }},
		{"Dedicated", func(c rueidis.Client) error {
			return c.Dedicated(func(rueidis.DedicatedClient) error { return nil })
		}},
	}
	for _, tc := range calls {
		require.NoError(t, tc.call(g), tc.name)
		require.Equal(t, 1, inner.calls[tc.name], "%s reaches the client before Close", tc.name)
	}
	gn := g.Nodes()["n1"]
	require.NoError(t, gn.Do(ctx, cmd).Error())
	gn.Close() // closes only the node's client
	require.Equal(t, 1, node.closed)
	require.NoError(t, g.Do(ctx, cmd).Error(), "a node's Close does not close the guard")
	require.Equal(t, 2, inner.calls["Do"])

	g.Close()
	require.Equal(t, 1, inner.closed)
	for _, tc := range calls {
		require.ErrorIs(t, tc.call(g), rueidis.ErrClosing, tc.name)
		require.ErrorIs(t, tc.call(gn), rueidis.ErrClosing, "node client: %s", tc.name)
	}
	require.Equal(t, 2, inner.calls["Do"], "nothing reaches the client after Close")
	require.Equal(t, 1, node.calls["Do"])
	for _, tc := range calls[1:] {
		require.Equal(t, 1, inner.calls[tc.name], tc.name)
	}
}
