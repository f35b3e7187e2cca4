package luakit

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/redis/rueidis"
)

// TryAgainBudget is how long a call keeps re-sending a command that a Cluster node answered TRYAGAIN,
// counted from that first reply. A node refuses a multi-key command with TRYAGAIN, running nothing,
// while the command's slot migrates and its keys are split between the two nodes or some are absent
// (a free lock's acquisition, for the whole migration). rueidis follows MOVED and ASK, but retries
// TRYAGAIN only for read-only commands, so [Script] (every Exec form; ExecMulti per element) and
// [DoMulti] re-send it, writes included: after about 1 ms, doubling up to 50 ms, each wait jittered
// between half and all of it, the last re-send when the budget ends, and no wait that would end after
// ctx's deadline. Then the TRYAGAIN reply is returned as is ([IsTryAgain]; [ClassTransient]). When ctx
// ends during a wait, the error matches ctx's error and still carries the reply (transient: nothing
// ran). A standalone or Sentinel server never answers TRYAGAIN.
const TryAgainBudget = 500 * time.Millisecond

// The backoff between re-sends after TRYAGAIN: the n-th wait (n from 0) is jittered in [d/2, d] with
// d = min(tryAgainFirst << n, tryAgainMax).
const (
	tryAgainFirst = time.Millisecond
	tryAgainMax   = 50 * time.Millisecond
)

// tryAgain paces the re-sends of one call after TRYAGAIN replies. The zero value is ready; use one
// per call, from one goroutine.
type tryAgain struct {
	first time.Time // when the first TRYAGAIN reply was read
	n     int       // waits so far
}

// wait decides whether the call whose last reply had error err is sent again: only when err is a
// TRYAGAIN reply, [TryAgainBudget] is not spent (the last wait is cut to end with it) and the wait
// ends before ctx's deadline. It then sleeps the backoff and reports true. When ctx ends before or
// during the sleep it reports false and an error that wraps both err and ctx's error; otherwise the
// error is nil and the caller returns its reply as is. A nil err returns at once, without allocating.
func (r *tryAgain) wait(ctx context.Context, err error) (bool, error) {
	if err == nil || !IsTryAgain(err) {
		return false, nil
	}
	now := time.Now()
	if r.n == 0 {
		r.first = now
	}
	left := TryAgainBudget - now.Sub(r.first)
	if left <= 0 {
		return false, nil
	}
	d := min(tryAgainFirst<<min(r.n, 16), tryAgainMax)
	d = min(d/2+rand.N(d/2+1), left) // the last send is at the budget's end
	if dl, ok := ctx.Deadline(); ok && dl.Before(now.Add(d)) {
		return false, nil
	}
	if ctx.Err() != nil {
		return false, &tryAgainEnded{reply: err, ctx: ctx.Err()}
	}
	r.n++
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-ctx.Done():
		return false, &tryAgainEnded{reply: err, ctx: ctx.Err()}
	}
}

// IsTryAgain reports whether err carries a TRYAGAIN error reply (looking through wrapped errors): a
// Cluster node refused a multi-key command while its slot migrates and the keys are split between
// the nodes; the command did not run. See [TryAgainBudget] for what Coordkit does about it. It never
// blocks and is safe for concurrent use.
func IsTryAgain(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && re.IsTryAgain()
}

// tryAgainEnded is the error of a call whose ctx ended while it waited to re-send a command answered
// TRYAGAIN: the server ran nothing (reply), and the caller stopped waiting (ctx).
type tryAgainEnded struct{ reply, ctx error }

func (e *tryAgainEnded) Error() string {
	return e.ctx.Error() + " (waiting to retry after " + e.reply.Error() + ")"
}

func (e *tryAgainEnded) Unwrap() []error { return []error{e.reply, e.ctx} }

// DoMulti is c.DoMulti(ctx, cmds...) for plain commands (not scripts: see [Script.ExecMulti]) with
// the commands a Cluster node answered TRYAGAIN sent again together, as [TryAgainBudget] describes:
// a multi-key read such as MGET is refused while its slot migrates and its keys are split. It returns
// one result per command in input order; a command re-sent runs after the others of the batch. The
// commands are pinned (rueidis does not recycle them) so that they can be sent again. It blocks until
// every reply arrives or ctx ends. Safe for concurrent use.
func DoMulti(ctx context.Context, c rueidis.Client, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if len(cmds) == 0 {
		return nil
	}
	for i := range cmds {
		cmds[i] = cmds[i].Pin()
	}
	res := c.DoMulti(ctx, cmds...)
	retryMulti(ctx, res, func(idx []int) {
		resend := make(rueidis.Commands, len(idx))
		for j, i := range idx {
			resend[j] = cmds[i]
		}
		for j, x := range c.DoMulti(ctx, resend...) {
			res[idx[j]] = x
		}
	})
	return res
}

// retryMulti re-sends with send, together, the elements of res whose result is a TRYAGAIN reply
// (send stores their new results in res), as [tryAgain] paces them, until none is, the budget is
// spent or ctx ends; after ctx ended, those results carry ctx's error as well (see tryAgainEnded).
func retryMulti(ctx context.Context, res []rueidis.RedisResult, send func(idx []int)) {
	var r tryAgain
	for {
		var again []int
		var last error
		for i, x := range res {
			if err := x.Error(); err != nil && IsTryAgain(err) {
				again, last = append(again, i), err
			}
		}
		if len(again) == 0 {
			return
		}
		retry, ended := r.wait(ctx, last)
		if !retry {
			if ended != nil {
				for _, i := range again {
					res[i] = rueidis.NewErrorResult(&tryAgainEnded{reply: res[i].Error(), ctx: ctx.Err()})
				}
			}
			return
		}
		send(again)
	}
}
