package ratelimit

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Limiter is one rate limit over one server key. Every decision is one script on the server using the
// server's clock; the limiter keeps only local state (the wait queue, statistics, settings).
//
// A Limiter is safe for concurrent use. Close it when done; it never closes the client.
type Limiter struct {
	// TODO(limiter)
}

// New returns a Limiter enforcing policy at key (after the key prefix). It does no I/O. It returns
// ErrNilClient, an error wrapping ErrInvalidPolicy, luakit.ErrEmptyKey for an empty key, or the error
// of an invalid option.
func New(client rueidis.Client, key string, policy Policy, opts ...Option) (*Limiter, error) {
	panic("unimplemented")
}

// Allow is AllowN(ctx, 1).
func (l *Limiter) Allow(ctx context.Context) (Result, error) { return l.AllowN(ctx, 1) }

// AllowN decides n permits now, in one round trip, without waiting. n = 0 probes whether one permit
// is available and writes nothing.
func (l *Limiter) AllowN(ctx context.Context, n int64) (Result, error) { panic("unimplemented") }

// Wait is WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) (Result, error) { return l.WaitN(ctx, 1) }

// WaitN decides n permits, waiting in the local queue for the server-computed availability time when
// they are not available now and the queue has room.
func (l *Limiter) WaitN(ctx context.Context, n int64) (Result, error) { panic("unimplemented") }

// Update changes the limiter's settings at runtime.
func (l *Limiter) Update(ctx context.Context, policy Policy, mode UpdateMode) error {
	panic("unimplemented")
}

// Policy returns the current settings as given to New or Update.
func (l *Limiter) Policy() Policy { panic("unimplemented") }

// Key returns the limiter's physical key (prefix included).
func (l *Limiter) Key() string { panic("unimplemented") }

// Stats returns this instance's statistics.
func (l *Limiter) Stats() Stats { panic("unimplemented") }

// IdleDuration returns how long the limiter has had no request in progress or waiting; ok is false
// while one is.
func (l *Limiter) IdleDuration() (d time.Duration, ok bool) { panic("unimplemented") }

// Close fails waiting requests with ErrClosed and makes later calls return ErrClosed.
func (l *Limiter) Close() error { panic("unimplemented") }
