package luakit

import (
	"context"
	"time"
)

// WithoutDeadline returns a context that ends when ctx ends or when ctx's deadline passes (with the
// same error: context.Canceled or context.DeadlineExceeded), but that carries no deadline itself. The
// returned stop function releases its resources; call it when the command is done.
//
// Why: rueidis sends a command whose context has a deadline on an idle connection synchronously with a
// socket deadline, and closes the connection when the deadline passes. The owner-checked cleanup that
// a primitive sends after such an uncertain command then travels on a new connection: it can reach the
// server before the late command still in the old one, or not at all while the new connection's
// handshake is slow. Without a deadline the command goes through the connection's pipeline queue;
// giving up on its reply leaves the connection open, and a cleanup sent next on the same connection is
// queued behind the late command, so the server runs them in order. A standalone rueidis client spreads
// keyed commands over several connections at random (2^ClientOption.PipelineMultiplex, up to 4 by
// default); send both with [Script.ExecOrdered] to keep them on one.
//
// When ctx has no deadline there is nothing to strip: it returns ctx itself and a stop function that
// does nothing (no allocation, which matters on hot paths). Otherwise it starts no goroutine: ctx's
// cancellation and deadline are watched with context.AfterFunc and time.AfterFunc. It is safe for
// concurrent use.
func WithoutDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); !ok {
		return ctx, noStop
	}
	out, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	if err := ctx.Err(); err != nil {
		// Already ended: end the result now (context.AfterFunc would run asynchronously, leaving a
		// moment in which a command could still be sent).
		cancel(err)
		return &causeErrContext{Context: out}, func() {}
	}
	stopParent := context.AfterFunc(ctx, func() { cancel(ctx.Err()) })
	var timer *time.Timer
	if dl, ok := ctx.Deadline(); ok {
		timer = time.AfterFunc(time.Until(dl), func() { cancel(context.DeadlineExceeded) })
	}
	return &causeErrContext{Context: out}, func() {
		if timer != nil {
			timer.Stop()
		}
		stopParent()
		cancel(context.Canceled)
	}
}

func noStop() {}

// causeErrContext reports its cancellation cause as Err, so callers that compare with
// context.DeadlineExceeded (or errors.Is on it) see the parent's reason.
type causeErrContext struct{ context.Context }

func (c *causeErrContext) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}
