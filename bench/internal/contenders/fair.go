package contenders

import (
	"context"

	"github.com/coordkit/coordkit/lock"
)

// CoordkitFair is the row name of Coordkit's fair lock (lock.FairLocker) in the hand-off table.
const CoordkitFair = "coordkit-fair"

type fairHandoff struct {
	holder, waiter *lock.FairLocker
	closers
}

// NewFairHandoff returns Coordkit's fair lock as a hand-off contender: a FairLocker over a cache-free
// client for the holder and another for the waiter, whose Acquire queues and blocks on its stream
// until the holder's release grants it the lease.
func NewFairHandoff(s Server) (Handoff, error) {
	hc, err := s.newClient()
	if err != nil {
		return nil, err
	}
	h := &fairHandoff{closers: closers{hc.Close}}
	wc, err := s.newClient()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.closers = append(h.closers, wc.Close)
	if h.holder, err = lock.NewFair(hc); err != nil {
		h.Close()
		return nil, err
	}
	if h.waiter, err = lock.NewFair(wc); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (*fairHandoff) Name() string { return CoordkitFair }

func (h *fairHandoff) Hold(ctx context.Context, key string) (Release, error) {
	return coordkitLease(h.holder.TryAcquire(ctx, key, TTL))
}

func (h *fairHandoff) Wait(ctx context.Context, key string) (Release, error) {
	return coordkitLease(h.waiter.Acquire(ctx, key, TTL))
}
