package ratelimit

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// DenyList is a set of denied identities stored in one server set, read through a bounded local cache.
type DenyList struct {
	// TODO(denylist)
}

// DenyListOption configures a DenyList.
type DenyListOption interface {
	applyDeny(*denyConfig) error
}

type denyConfig struct {
	cacheDuration time.Duration
	cacheCapacity int
	keys          string // prefix
}

// NewDenyList returns a DenyList over the set at key.
func NewDenyList(client rueidis.Client, key string, opts ...DenyListOption) (*DenyList, error) {
	panic("unimplemented")
}

// SetDenied adds identity to (denied) or removes it from the set.
func (d *DenyList) SetDenied(ctx context.Context, identity string, denied bool) error {
	panic("unimplemented")
}

// IsDenied reports whether identity is denied, from the cache or one server read.
func (d *DenyList) IsDenied(ctx context.Context, identity string) (bool, error) {
	panic("unimplemented")
}

// Invalidate clears the local cache and detaches in-flight reads.
func (d *DenyList) Invalidate() { panic("unimplemented") }
