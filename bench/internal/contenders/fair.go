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
// client for the holder and another for the waiter, whose Acquire queues and blocks on its grant list
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

// coordkitFairLock: lock.FairLocker TryAcquire + Lease.Release over one cache-free client: the fair
// lock's uncontended cycle.
type coordkitFairLock struct {
	f *lock.FairLocker
	closers
}

// NewCoordkitFairLock returns Coordkit's fair lock as a lock-cycle contender: lock.NewFair over a
// cache-free client, TryAcquire then Lease.Release (nobody waits, so the release deletes the lease).
func NewCoordkitFairLock(s Server) (Lock, error) {
	c, err := s.newClient()
	if err != nil {
		return nil, err
	}
	f, err := lock.NewFair(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &coordkitFairLock{f: f, closers: closers{c.Close}}, nil
}

func (*coordkitFairLock) Name() string { return CoordkitFair }

func (c *coordkitFairLock) TryAcquireRelease(ctx context.Context, key string) error {
	l, err := c.f.TryAcquire(ctx, key, TTL)
	if err != nil {
		return err
	}
	return coordkitRelease(ctx, l)
}
