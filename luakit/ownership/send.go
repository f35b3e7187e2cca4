package ownership

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Send runs an acquisition (or any command of a handle) so that an owner-checked cleanup sent after it
// runs after it on the server: without a socket deadline ([luakit.WithoutDeadline]; ctx still bounds the
// wait for the reply) and through [luakit.Script.ExecOrdered]. It returns the time taken just before the
// send, from which the handle's local estimate is measured, and the reply. It blocks for one round trip.
//
// A ctx that already ended sends nothing: the result then carries ctx.Err(), which classifies as
// uncertain, so callers that must tell "nothing sent" apart check ctx.Err() first.
func Send(ctx context.Context, s *luakit.Script, c rueidis.Client, keys, args []string) (time.Time, rueidis.RedisResult) {
	if err := ctx.Err(); err != nil {
		return time.Now(), rueidis.NewErrorResult(err)
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	start := time.Now()
	resp := s.ExecOrdered(ectx, c, keys, args)
	stop()
	return start, resp
}

// SendTracked is [Send] through [luakit.Script.ExecOrderedTracked]: the acquisition's reads of the keys
// are tracked for this client, so a busy attempt needs no arming read before a [Waiter] sleeps (see
// [TryResult].Tracked). tracked is false when tracking could not be armed this way.
func SendTracked(ctx context.Context, s *luakit.Script, c rueidis.Client, keys, args []string) (start time.Time, resp rueidis.RedisResult, tracked bool) {
	if err := ctx.Err(); err != nil {
		return time.Now(), rueidis.NewErrorResult(err), false
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	start = time.Now()
	resp, tracked = s.ExecOrderedTracked(ectx, c, keys, args)
	stop()
	return start, resp, tracked
}
