package luakit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// learned returns a script whose digest f has reported, with f's journal emptied.
func learned(t *testing.T, f *scriptServer, src string) (*Script, string) {
	t.Helper()
	s := NewScript("t", src)
	require.NoError(t, s.Exec(context.Background(), f, nil, nil).Error())
	f.take()
	require.NotEmpty(t, s.SHA1())
	return s, s.SHA1()
}

func repeat(n int, cmds ...string) []string {
	var out []string
	for range n {
		out = append(out, cmds...)
	}
	return out
}

// TestScriptRetriesTryAgain: a call answered TRYAGAIN (a Cluster slot migration; the script did not
// run) is sent again, the same way, until it is answered otherwise, by Exec, ExecOrdered and
// ExecOrderedTracked (both of its commands again); a NOSCRIPT met on a re-send still falls back to
// EVAL.
func TestScriptRetriesTryAgain(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s, d := learned(t, f, "return KEYS[1]")

	f.tryAgain = 3
	require.NoError(t, s.Exec(ctx, f, nil, []string{"a"}).Error())
	require.Equal(t, repeat(4, "[EVALSHA "+d+" 0 a]"), f.take())

	f.tryAgain = 2
	require.NoError(t, s.ExecOrdered(ctx, f, []string{"k"}, nil).Error())
	require.Equal(t, repeat(3, "[EVALSHA "+d+" 1 k]"), f.take())

	f.tryAgain = 2
	resp, tracked := s.ExecOrderedTracked(ctx, f, []string{"k"}, nil)
	require.NoError(t, resp.Error())
	require.True(t, tracked)
	require.Equal(t, repeat(3, "[CLIENT CACHING YES]", "[EVALSHA "+d+" 1 k]"), f.take())

	f.tryAgain = 1
	f.flush()
	require.NoError(t, s.Exec(ctx, f, nil, []string{"b"}).Error())
	require.Equal(t, []string{"[EVALSHA " + d + " 0 b]", "[EVALSHA " + d + " 0 b]", "[EVAL return KEYS[1] 0 b]"}, f.take())
}

// TestScriptExecMultiRetriesTryAgain: ExecMulti sends again, together, only the elements answered
// TRYAGAIN, and returns every result in input order.
func TestScriptExecMultiRetriesTryAgain(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s, d := learned(t, f, "return 1")
	batch := []rueidis.LuaExec{{Args: []string{"a"}}, {Args: []string{"b"}}, {Args: []string{"c"}}}
	f.tryAgain = 2 // the first two elements of the first send
	res := s.ExecMulti(ctx, f, batch...)
	require.Len(t, res, 3)
	for _, r := range res {
		require.NoError(t, r.Error())
	}
	require.Equal(t, []string{
		"[EVALSHA " + d + " 0 a]", "[EVALSHA " + d + " 0 b]", "[EVALSHA " + d + " 0 c]",
		"[EVALSHA " + d + " 0 a]", "[EVALSHA " + d + " 0 b]",
	}, f.take())
}

// TestScriptTryAgainBudget: a call answered TRYAGAIN every time returns that reply after about
// TryAgainBudget, a handful of sends later; it is transient and did not apply.
func TestScriptTryAgainBudget(t *testing.T) {
	f := newScriptServer(t)
	s, _ := learned(t, f, "return 1")
	f.tryAgain = 1 << 30
	start := time.Now()
	err := s.Exec(context.Background(), f, nil, nil).Error()
	took := time.Since(start)
	require.True(t, IsTryAgain(err), "%v", err)
	require.Equal(t, ClassTransient, Classify(err))
	require.False(t, MayHaveApplied(err))
	require.GreaterOrEqual(t, took, TryAgainBudget, "gave up before the budget")
	require.Less(t, took, TryAgainBudget+tryAgainMax, "waited past the budget")
	sends := len(f.take())
	require.GreaterOrEqual(t, sends, 8)
	require.LessOrEqual(t, sends, 30)
}

// TestScriptTryAgainDeadline: no wait starts that would end after ctx's deadline: the TRYAGAIN reply
// is returned before the deadline, not the deadline's error.
func TestScriptTryAgainDeadline(t *testing.T) {
	f := newScriptServer(t)
	s, _ := learned(t, f, "return 1")
	f.tryAgain = 1 << 30
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Exec(ctx, f, nil, nil).Error()
	require.True(t, IsTryAgain(err), "%v", err)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Greater(t, len(f.take()), 1, "never retried")
}

// TestScriptTryAgainCanceled: when ctx ends during a wait the call returns at once with an error that
// matches ctx's error and still carries the TRYAGAIN reply: transient (nothing ran), not uncertain.
// ExecMulti marks each element still refused the same way.
func TestScriptTryAgainCanceled(t *testing.T) {
	f := newScriptServer(t)
	s, _ := learned(t, f, "return 1")
	ctx, cancel := context.WithCancel(context.Background())
	f.tryAgain, f.onTryAgain = 1<<30, cancel
	err := s.ExecOrdered(ctx, f, []string{"k"}, nil).Error()
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, IsTryAgain(err), "%v", err)
	require.Equal(t, ClassTransient, Classify(err))
	require.False(t, MayHaveApplied(err))
	require.Len(t, f.take(), 1)

	ctx, cancel = context.WithCancel(context.Background())
	f.onTryAgain = cancel
	res := s.ExecMulti(ctx, f, rueidis.LuaExec{}, rueidis.LuaExec{})
	for _, r := range res {
		require.ErrorIs(t, r.Error(), context.Canceled)
		require.True(t, IsTryAgain(r.Error()))
	}
	require.Len(t, f.take(), 2)
}

// TestScriptNoTryAgainNoCost: a reply that is not TRYAGAIN is returned at once: no wait, and no
// allocation for a success.
func TestScriptNoTryAgainNoCost(t *testing.T) {
	var r tryAgain
	ctx := context.Background()
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if again, err := r.wait(ctx, nil); again || err != nil {
			t.Fatal("retried a success")
		}
	}))
	other := redisErr(t, "BUSY Redis is busy running a script")
	again, err := r.wait(ctx, other)
	require.False(t, again)
	require.NoError(t, err)
}

// plainServer answers MGET with its keys' names, TRYAGAIN for the next tryAgain commands, and records
// every command.
type plainServer struct {
	rueidis.Client
	t        *testing.T
	mu       sync.Mutex
	tryAgain int
	sent     []string
}

func (p *plainServer) DoMulti(_ context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := make([]rueidis.RedisResult, len(cmds))
	for i, c := range cmds {
		w := c.Commands()
		p.sent = append(p.sent, strings.Join(w, " "))
		if p.tryAgain > 0 {
			p.tryAgain--
			res[i] = rueidis.NewErrorResult(redisErr(p.t, "TRYAGAIN Multiple keys request during rehashing of slot"))
			continue
		}
		res[i] = rueidis.NewResult(str(p.t, strings.Join(w[1:], ",")), nil)
	}
	return res
}

// TestDoMultiRetriesTryAgain: DoMulti sends again, together and unchanged, the commands answered
// TRYAGAIN, and returns the results in input order.
func TestDoMultiRetriesTryAgain(t *testing.T) {
	p := &plainServer{t: t, tryAgain: 3}
	b := rueidis.Builder{}
	res := DoMulti(context.Background(), p,
		b.Arbitrary("MGET").Args("a", "b").Build(), b.Arbitrary("MGET").Args("c").Build())
	require.Len(t, res, 2)
	for i, want := range []string{"a,b", "c"} {
		got, err := res[i].ToString()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	require.Equal(t, []string{"MGET a b", "MGET c", "MGET a b", "MGET c", "MGET a b"}, p.sent)
	require.Nil(t, DoMulti(context.Background(), p))
	require.False(t, IsTryAgain(errors.New("TRYAGAIN as text only")))
}
