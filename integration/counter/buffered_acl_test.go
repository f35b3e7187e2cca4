package counter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/integration/internal/matrix"
)

// testBufferedRefusedFlush: a user without PEXPIRE flushes a Buffered with an expiry (INCRBY then
// PEXPIRE). Each refused flush writes nothing and keeps its delta; once PEXPIRE is granted the
// server holds exactly the sum of the adds, never more, across several flushes (before the script
// checked PEXPIRE first, each refused flush had already applied INCRBY and the delta was re-added:
// five Add(1) became 105 on the server).
func testBufferedRefusedFlush(t *testing.T, e *env) {
	const user = "acl-counter-buf"
	rules := append(append([]string{"~acl:buf:*"}, matrix.ClientACL...), aclRules(counterCommands)...)
	opt := e.ACLUser(t, user, matrix.Without(rules, "pexpire")...)
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := counter.New(c)
	require.NoError(t, err)
	defer func() { _ = s.Close(context.Background()) }()
	const key = "acl:buf:{c}n"
	t.Cleanup(func() { _ = e.Raw.Do(context.Background(), e.Raw.B().Del().Key(key).Build()).Error() })
	b, err := counter.NewBuffered(s, key, counter.WithFlushInterval(time.Hour), counter.WithFlushTTL(time.Minute))
	require.NoError(t, err)
	defer func() { _ = b.Close(context.Background()) }()

	server := func() int64 {
		v, err := e.Raw.Do(matrix.Ctx(t), e.Raw.B().Get().Key(key).Build()).AsInt64()
		if rueidis.IsRedisNil(err) {
			return 0
		}
		require.NoError(t, err)
		return v
	}
	var added int64
	for i := range 5 {
		require.NoError(t, b.Add(1))
		added++
		err := b.Flush(matrix.Ctx(t))
		require.ErrorIs(t, err, counter.ErrNoPermission, "flush %d", i)
		require.Zero(t, server(), "a refused flush writes nothing (flush %d)", i)
		require.Equal(t, added, b.Pending(), "the refused delta is kept (flush %d)", i)
	}
	for _, n := range e.Nodes {
		_, err := n.Do(matrix.Ctx(t), "ACL", "SETUSER", user, "+pexpire")
		require.NoError(t, err)
	}
	for i := range 3 {
		require.NoError(t, b.Add(int64(i+2)))
		added += int64(i + 2)
		require.NoError(t, b.Flush(matrix.Ctx(t)))
		require.Equal(t, added, server(), "the server holds exactly the adds (flush %d after the grant)", i)
		require.Zero(t, b.Pending())
	}
	require.NoError(t, b.Close(matrix.Ctx(t)))
	require.Equal(t, added, server())
}
