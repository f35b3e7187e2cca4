package latch_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/latch"
)

// testNoChannelPermission: the common "+@all ~app:*" user has no channel (Redis 7's
// acl-pubsub-default resetchannels). Create is refused before it writes anything (its script checks
// SPUBLISH on the key's channel first), and a Wait whose SSUBSCRIBE is refused returns
// ErrNoPermission instead of retrying the subscription until ctx ends.
func testNoChannelPermission(t *testing.T, e *env) {
	const key = "aclch:latch:k"
	require.NoError(t, e.Raw.Do(matrix.Ctx(t), e.Raw.B().Hset().Key(key).FieldValue().
		FieldValue("x", "1").Build()).Error())
	t.Cleanup(func() { _ = e.Raw.Do(context.Background(), e.Raw.B().Del().Key(key).Build()).Error() })
	before := e.Snapshot(t, "aclch:*")
	opt := e.ACLUser(t, "acl-latch-nochan", append([]string{"~aclch:*", "+@all", "resetchannels"}, matrix.ClientACL...)...)
	c, err := rueidis.NewClient(opt)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ls, err := latch.New(c)
	require.NoError(t, err)

	_, err = ls.Create(matrix.Ctx(t), "aclch:latch:new", 1)
	require.ErrorIs(t, err, latch.ErrNoPermission)
	require.Equal(t, before, e.Snapshot(t, "aclch:*"), "a refused Create writes nothing")

	// A latch made by the admin: the user may read it but not subscribe to its channel.
	admin := e.latches(t)
	l, err := admin.Create(matrix.Ctx(t), "aclch:latch:w", 1)
	require.NoError(t, err)
	ul, err := ls.Join(matrix.Ctx(t), "aclch:latch:w")
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = ul.Wait(wctx)
	require.ErrorIs(t, err, latch.ErrNoPermission)
	require.NoError(t, wctx.Err(), "Wait returned on its own, not at ctx's end")
	_, err = l.CountDown(matrix.Ctx(t))
	require.NoError(t, err)
}
