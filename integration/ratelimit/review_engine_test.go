package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/ratelimit"
)

func init() {
	register(
		scenario{name: "review_engine_deadline_keeps_connection", run: reviewEngineDeadlineKeepsConnection, standaloneOnly: true},
	)
}

// review: a decision cut off by its context's deadline fails alone (ErrUncertain); a decision of
// another goroutine sent meanwhile on the same client, without a deadline, is decided once the
// server answers. With the deadline on the wire, rueidis sent the first decision synchronously with a
// socket deadline and closed the shared connection at it, failing the other decision too.
func reviewEngineDeadlineKeepsConnection(t *testing.T, e *env) {
	key := e.key(t)
	c := e.newClient(t)
	l := e.limiter(t, c, key, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
	require.NoError(t, c.Do(ctx(t), c.B().Ping().Build()).Error()) // connected

	e.srv.MustPause(t)
	resumed := false
	defer func() {
		if !resumed {
			e.srv.MustResume(t)
		}
	}()
	first := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := l.AllowN(c, 1)
		first <- err
	}()
	time.Sleep(200 * time.Millisecond) // the first decision is on the wire first (order only, asserted on outcomes)
	type outcome struct {
		res ratelimit.Result
		err error
	}
	second := make(chan outcome, 1)
	noDeadline, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, err := l.AllowN(noDeadline, 2)
		second <- outcome{res, err}
	}()
	errFirst := <-first
	require.ErrorIs(t, errFirst, ratelimit.ErrUncertain)
	require.ErrorIs(t, errFirst, context.DeadlineExceeded)
	e.srv.MustResume(t)
	resumed = true
	var o outcome
	select {
	case o = <-second:
	case <-time.After(30 * time.Second):
		t.Fatal("the second decision never returned")
	}
	require.NoError(t, o.err, "the other decision was failed by the first one's deadline")
	require.True(t, o.res.Allowed)
	res, err := l.AllowN(ctx(t), 0)
	require.NoError(t, err)
	require.Contains(t, []int64{8, 7}, res.Remaining, "2 taken, plus the uncertain 1 or not")
}
