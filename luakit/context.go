package luakit

import (
	"context"
	"time"
)

// WithoutDeadline returns a context that ends when ctx ends or when ctx's deadline passes (with the
// same error: context.Canceled or context.DeadlineExceeded), but that carries no deadline itself, so
// that rueidis queues the command on a pipelined connection instead of sending it with a socket
// deadline that closes the connection when it passes (why this matters for a cleanup sent next: see
// the package documentation, "Command order and deadlines"; send both with [Script.ExecOrdered]). The
// returned stop function releases its resources; call it when the command is done.
//
// When ctx has no deadline it returns ctx itself and a stop function that does nothing (no
// allocation, which matters on hot paths). Otherwise it starts no goroutine: ctx's cancellation and
// deadline are watched with context.AfterFunc and time.AfterFunc. It is safe for concurrent use.
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
