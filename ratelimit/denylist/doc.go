// Package denylist is the deny list of package ratelimit: a set of denied identities stored in one
// server set, read through a bounded local cache. Bind a [List] to limiters with
// ratelimit.WithDenyList or ratelimit.WithKeyedDenyList: a denied identity is rejected with reason
// deny_list before any capacity is touched. Share one List per process (and per set): each instance
// has its own cache, so one instance per identity multiplies the cache bound and defeats read
// sharing.
//
// # Storage
//
// The set at the key (after the [WithKeyPrefix] prefix; binary-safe) holds the denied identities as
// members, compared byte for byte (exact and case-sensitive; any non-empty bytes work). Identities
// are application-controlled: their length is not bounded here, and cached ones are held in memory.
// [List.SetDenied] runs SADD or SREM in a Lua script, reads run SISMEMBER in a Lua script: scripting
// and these set commands must be permitted. No expiry is set; membership persists until removed. The
// key is read on its own, so it may live in another Cluster slot than the limiters' keys, and a
// cache miss costs one extra round trip. Do not share the key with a limiter's state or another data
// type ([ErrForeignData]).
//
// # Cache
//
// [List.IsDenied] caches both answers (denied and allowed) for a fixed duration ([WithCacheDuration],
// default 1 s, at most 1 min) counted from the start of the server read; hits do not extend it. The
// cache holds at most [WithCacheCapacity] identities (default 1024); when full, expired entries go
// first, then the least recently used one. A zero duration disables the cache and read sharing:
// every call reads the server.
//
// Concurrent misses for one identity share one server read while that read is younger than the
// cache duration; a later miss starts a fresh read, while callers already waiting keep the result of
// the read they joined. A shared read runs in its own goroutine with a context detached from its
// callers (context.WithoutCancel of the first caller's context, so values are kept) and bounded by
// [WithReadTimeout] (default 5 s) and by [List.Close]: cancelling one caller ends only that caller's
// wait, never the read the others wait for. The number of shared reads in flight is bounded by the
// cache capacity; a miss for another identity beyond that bound reads the server directly with the
// caller's context and caches nothing.
//
// [List.Invalidate] (and every [List.SetDenied], before and after its write) empties the cache and
// detaches the reads in flight: they still answer their waiters but no longer fill the cache, and
// later misses never join them. Other instances and other processes see a change when their entries
// expire or after their own Invalidate: there is no cross-process invalidation. The same delay
// applies to SADD and SREM sent by anything else.
//
// During an outage, cached answers are served until they expire; a miss returns the read's error
// (never cached), which makes the limiter's call fail without acquiring capacity.
//
// Membership and capacity are checked in separate round trips, not atomically: a change does not
// revoke an admission in progress, even with caching disabled. The deny list is an admission filter
// with bounded staleness, not an authorization mechanism.
//
// The in-flight bookkeeping is a small map keyed by identity, with a generation number for
// invalidation, rather than golang.org/x/sync/singleflight: singleflight has no notion of a read's
// age and would need Forget calls to detach reads, so the map states the rules directly.
//
// # Concurrency
//
// A List is safe for concurrent use. Its background work is the goroutines of shared reads, each
// ending when its read does (at the latest after the read timeout); [List.Close] ends them at once
// and waits for them. It never closes the client.
package denylist
