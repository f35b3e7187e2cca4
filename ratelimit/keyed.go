package ratelimit

import (
	"context"

	"github.com/redis/rueidis"
)

// Keyed applies one policy to many keys (per tenant, per IP, per route) without a Go object per key:
// each key is its own limiter in the server.
type Keyed struct {
	// TODO(limiter)
}

// NewKeyed returns a Keyed limiter.
func NewKeyed(client rueidis.Client, policy Policy, opts ...Option) (*Keyed, error) {
	panic("unimplemented")
}

// AllowN decides n permits for key now, in one round trip, without waiting.
func (k *Keyed) AllowN(ctx context.Context, key string, n int64) (Result, error) {
	panic("unimplemented")
}

// WaitN decides n permits for key, waiting in that key's local queue.
func (k *Keyed) WaitN(ctx context.Context, key string, n int64) (Result, error) {
	panic("unimplemented")
}

// Policy returns the policy.
func (k *Keyed) Policy() Policy { panic("unimplemented") }

// Stats returns the statistics of key's local state (zero Stats with Available -1 when it has none).
func (k *Keyed) Stats(key string) Stats { panic("unimplemented") }

// Close closes every key's local state.
func (k *Keyed) Close() error { panic("unimplemented") }
