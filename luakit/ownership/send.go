package ownership

import (
	"context"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Sent is what one acquisition attempt's send returned ([Config.Send], [Config.SendTracked]).
type Sent struct {
	// Start is the time taken just before the send, from which a granted handle's local estimate is
	// measured.
	Start time.Time
	// Resp is the acquire script's reply.
	Resp rueidis.RedisResult
	// Tracked reports that the attempt armed tracking of the resource's key (see [TryResult].Tracked).
	Tracked bool
	// Ack is nil when Config.Ack asks for nothing or the attempt's write was acknowledged as it asks;
	// otherwise a [*luakit.AckError] ([luakit.ErrNotAcknowledged]). [Config.Try] then refuses a grant:
	// it sends the owner-checked cleanup and returns the error.
	Ack error
}

// Send runs an acquisition so that an owner-checked cleanup sent after it runs after it on the server:
// without a socket deadline ([luakit.WithoutDeadline]; ctx still bounds the wait for the reply) and
// through [luakit.Script.ExecOrdered], followed in the same round trip by the acknowledgement that c.Ack
// asks for, if any ([luakit.Script.ExecOrderedAck]; on a Cluster on a dedicated connection to keys[0]'s
// slot). It blocks for one round trip (and the server's wait for acknowledgements, at most
// c.Ack.Timeout).
//
// A ctx that already ended sends nothing: the result then carries ctx.Err(), which classifies as
// uncertain, so callers that must tell "nothing sent" apart check ctx.Err() first. Neither is
// anything sent when c.Ack asks for WAITAOF and the server lacks it ([Config.CheckAck]): the result
// then carries the [*luakit.UnsupportedError].
func (c *Config) Send(ctx context.Context, s *luakit.Script, client rueidis.Client, keys, args []string) Sent {
	if err := ctx.Err(); err != nil {
		return Sent{Start: time.Now(), Resp: rueidis.NewErrorResult(err)}
	}
	if err := c.CheckAck(ctx, client); err != nil {
		return Sent{Start: time.Now(), Resp: rueidis.NewErrorResult(err)}
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	sent := Sent{Start: time.Now()}
	sent.Resp, sent.Ack = s.ExecOrderedAck(ectx, client, c.Ack, keys, args)
	return sent
}

// SendTracked is [Config.Send] through [luakit.Script.ExecOrderedTrackedAck]: the acquisition's reads
// of the keys are tracked for this client, so a busy attempt needs no arming read before a [Waiter]
// sleeps (see [TryResult].Tracked). Tracked is false when tracking could not be armed this way.
func (c *Config) SendTracked(ctx context.Context, s *luakit.Script, client rueidis.Client, keys, args []string) Sent {
	if err := ctx.Err(); err != nil {
		return Sent{Start: time.Now(), Resp: rueidis.NewErrorResult(err)}
	}
	if err := c.CheckAck(ctx, client); err != nil {
		return Sent{Start: time.Now(), Resp: rueidis.NewErrorResult(err)}
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	defer stop()
	sent := Sent{Start: time.Now()}
	sent.Resp, sent.Tracked, sent.Ack = s.ExecOrderedTrackedAck(ectx, client, c.Ack, keys, args)
	return sent
}
