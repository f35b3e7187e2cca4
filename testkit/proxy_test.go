package testkit

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// proxied starts a server, a proxy in front of it and a client of the proxy (each closed at
// t.Cleanup), and returns them with a 10s context.
func proxied(t *testing.T, mutate ...func(*rueidis.ClientOption)) (*Server, *Proxy, rueidis.Client, context.Context) {
	t.Helper()
	s := Start(t, firstAvailable(t))
	p := NewProxy(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return s, p, p.Client(t, mutate...), ctx
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	s, p, c, ctx := proxied(t)
	assert.NotEqual(t, s.Addr, p.Addr)
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())

	const d = 200 * time.Millisecond
	require.NoError(t, p.AddLatency(d))
	start := time.Now()
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())
	assert.GreaterOrEqual(t, time.Since(start), d)

	require.NoError(t, p.AddLatency(2*d)) // replaces the first
	start = time.Now()
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())
	assert.GreaterOrEqual(t, time.Since(start), 2*d)

	require.NoError(t, p.Reset())
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())
}

// The dropped-reply mode makes a command's outcome uncertain while the server applied it (issue
// 3, "Done when").
func TestProxyDropRepliesUncertainOutcome(t *testing.T) {
	t.Parallel()
	s, p, c, ctx := proxied(t)
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())

	require.NoError(t, p.DropReplies())
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err := c.Do(short, c.B().Incr().Key("uncertain").Build()).Error()
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the client must not learn the outcome")

	// Yet the server executed it.
	msg, err := s.Do(ctx, "GET", "uncertain")
	require.NoError(t, err)
	n, err := msg.AsInt64()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	// Reset closes the poisoned connection; the client reconnects.
	require.NoError(t, p.Reset())
	require.Eventually(t, func() bool {
		c2, cancel2 := context.WithTimeout(ctx, time.Second)
		defer cancel2()
		v, err := c.Do(c2, c.B().Get().Key("uncertain").Build()).AsInt64()
		return err == nil && v == 1
	}, 8*time.Second, 50*time.Millisecond)
}

func TestProxyCutConnections(t *testing.T) {
	t.Parallel()
	s, p, c, ctx := proxied(t, func(o *rueidis.ClientOption) { o.DisableRetry = true })
	id1, err := c.Do(ctx, c.B().ClientId().Build()).AsInt64()
	require.NoError(t, err)

	require.NoError(t, p.CutConnections())
	// The next command fails, or the client has already noticed and reconnected: either way the
	// old connection is gone.
	id2, err := c.Do(ctx, c.B().ClientId().Build()).AsInt64()
	if err != nil {
		t.Logf("first command after the cut: %v", err)
		require.Eventually(t, func() bool {
			id2, err = c.Do(ctx, c.B().ClientId().Build()).AsInt64()
			if err != nil {
				t.Logf("after the cut: %v", err)
			}
			return err == nil
		}, 8*time.Second, 20*time.Millisecond)
	}
	assert.NotEqual(t, id1, id2, "the client kept its connection through CutConnections")
	assert.Eventually(t, func() bool { // the server sees the cut connection closed
		msg, err := s.Do(ctx, "CLIENT", "LIST", "ID", strconv.FormatInt(id1, 10))
		list, _ := msg.ToString() // RESP3 verbatim string: "txt:" + the list
		return err == nil && strings.TrimSpace(strings.TrimPrefix(list, "txt:")) == ""
	}, 5*time.Second, 20*time.Millisecond)

	require.NoError(t, p.Close())
	require.NoError(t, p.Close()) // idempotent
	assert.Error(t, p.DropReplies())
	assert.Error(t, p.CutConnections())
}

func TestProxyRefuseAccept(t *testing.T) {
	t.Parallel()
	_, p, c, ctx := proxied(t, func(o *rueidis.ClientOption) { o.DisableRetry = true })
	require.NoError(t, c.Do(ctx, c.B().Ping().Build()).Error())

	require.NoError(t, p.Refuse())
	for i := 0; i < 3; i++ { // the open connection is gone and every new dial is refused
		require.Error(t, c.Do(ctx, c.B().Ping().Build()).Error(), "command %d while refusing", i)
	}
	_, err := net.DialTimeout("tcp", p.Addr, time.Second)
	require.Error(t, err, "the proxy still accepts connections")

	require.NoError(t, p.Accept())
	require.NoError(t, p.Accept(), "Accept while listening is a no-op")
	require.Eventually(t, func() bool { return c.Do(ctx, c.B().Ping().Build()).Error() == nil },
		8*time.Second, 20*time.Millisecond)
}
