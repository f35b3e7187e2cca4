package luakit

import (
	"context"

	"github.com/redis/rueidis"
)

// DoOrdered sends one plain command, name followed by keys and then args, in the order
// [Script.ExecOrdered] keeps: on a standalone or Sentinel client on the client's first pipelined
// connection, so it runs on the server after every ExecOrdered or DoOrdered call that reached that
// queue before it through the same client (an owner-checked DELIFEQ after a late acquisition script);
// on a Cluster client routed by the keys' slot, as Do (the keys must share one slot). Pair it with
// [WithoutDeadline]; where the order does not hold: see the package documentation, "Command order and
// deadlines".
//
// A NOPERM reply comes back as a [*PermissionError]; a TRYAGAIN reply is sent again as for
// [Script.Exec] (see [TryAgainBudget]). Other replies and errors are as c.Do returns them
// ([Classify] sorts them). It blocks until the reply arrives or ctx ends. Safe for concurrent use.
func DoOrdered(ctx context.Context, c rueidis.Client, name string, keys []string, args ...string) rueidis.RedisResult {
	cluster := c.Mode() == rueidis.ClientModeCluster
	var r tryAgain
	for {
		var cmd rueidis.Completed
		if cluster {
			cmd = c.B().Arbitrary(name).Keys(keys...).Args(args...).Build()
		} else {
			// Keys as Args: the command keeps the builder's NoSlot, which rueidis' standalone
			// multiplexer always sends on its first connection (as ExecOrdered's scripts).
			cmd = c.B().Arbitrary(name).Args(keys...).Args(args...).Build()
		}
		resp := c.Do(ctx, cmd)
		if again, ended := r.wait(ctx, resp.Error()); !again {
			if ended != nil {
				return rueidis.NewErrorResult(ended)
			}
			return permResult(resp)
		}
	}
}
