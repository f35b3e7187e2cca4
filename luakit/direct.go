package luakit

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// ExecDirect is [Script.Exec] for a call on a latency-critical path, such as a release whose script
// wakes a blocked waiter: it sends the call on a connection of the client's blocking pool (rueidis'
// Dedicate) and, because the context then has a deadline, rueidis writes it and reads the reply on the
// calling goroutine, without the hand-over to the auto-pipelining writer goroutine that a pipelined call
// pays (measured on a shared 2-core machine: about 0.1 ms of a 0.4 ms hand-off).
//
// ctx's deadline bounds the round trip; when ctx has none, bound does (1s when not positive). The
// deadline is the connection's: once it passes, rueidis closes that connection and the reply is lost,
// so an error after the send is uncertain as for Exec. Cancelling a ctx without a deadline does not
// interrupt the call. The call is not ordered with the client's pipelined calls (ExecOrdered): use it
// only where the script checks everything it needs itself (an owner-checked release). Until the
// script's digest is known (its first call), and after a NOSCRIPT, TRYAGAIN, MOVED or ASK reply (the
// server ran nothing), the call is sent again by [Script.ExecOrdered] instead. It takes one connection
// of the blocking pool for the round trip (ClientOption.BlockingPoolSize, 1000 by default, shared with
// blocking commands): with all of them in use it waits for one. Replies are as for Exec. Safe for
// concurrent use.
func (s *Script) ExecDirect(ctx context.Context, c rueidis.Client, keys, args []string, bound time.Duration) rueidis.RedisResult {
	digest := s.SHA1()
	if digest == "" {
		return s.ExecOrdered(ctx, c, keys, args)
	}
	if err := ctx.Err(); err != nil {
		return rueidis.NewErrorResult(err)
	}
	if _, ok := ctx.Deadline(); !ok {
		if bound <= 0 {
			bound = time.Second
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	dc, done := c.Dedicate()
	resp := dc.Do(ctx, s.command(dc.B(), digest, false, true, keys, args))
	done()
	if re, ok := rueidis.IsRedisErr(resp.Error()); ok {
		_, redirect := re.IsRedirect()
		if re.IsNoScript() || re.IsTryAgain() || redirect {
			return s.ExecOrdered(ctx, c, keys, args)
		}
	}
	return permResult(resp)
}
