package luakit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// Feature describes a server capability, identified by a command that only
// servers with the capability know.
type Feature struct {
	// Name is the human name used in errors, e.g. "hash-field expiry".
	Name string
	// Command is the command probed with COMMAND INFO, e.g. "HPEXPIRE".
	Command string
	// Minimum names the first servers with the feature, for errors.
	Minimum string
}

// HashFieldTTL is per-field expiry in hashes (HPEXPIRE and friends), needed
// by named leases in hash fields: Redis 7.4+ or Valkey 9.0+.
var HashFieldTTL = Feature{Name: "hash-field expiry", Command: "HPEXPIRE", Minimum: "Redis 7.4 or Valkey 9.0"}

// Probe reports whether the server behind c knows f.Command, by sending
// COMMAND INFO <command>: a nil or empty entry means false. It probes by
// command, never by version string (Valkey 9 reports redis_version 7.2.4
// yet has HPEXPIRE).
//
// It blocks for one round trip. The error is non-nil when f.Command is
// empty or the probe itself fails (network, context, or a server refusal
// such as NOPERM when ACLs forbid COMMAND INFO, which matches
// [ErrNoPermission]); the bool is then meaningless. On
// a Cluster the probe reaches one node; mixed-version Clusters are not
// detected. Safe for concurrent use.
func Probe(ctx context.Context, c rueidis.Client, f Feature) (bool, error) {
	if f.Command == "" {
		return false, errors.New("luakit: probe: feature has no command")
	}
	arr, err := c.Do(ctx, c.B().CommandInfo().CommandName(f.Command).Build()).ToArray()
	if err != nil {
		if rueidis.IsRedisNil(err) {
			return false, nil
		}
		return false, fmt.Errorf("luakit: probe %s: %w", f.Command, Permission(err))
	}
	return commandInfoPresent(arr), nil
}

func commandInfoPresent(arr []rueidis.RedisMessage) bool {
	if len(arr) == 0 || arr[0].IsNil() {
		return false
	}
	if inner, err := arr[0].ToArray(); err == nil && len(inner) == 0 {
		return false
	}
	return true
}

// FeatureCache remembers successful [Probe] results per Feature.Command
// (case-insensitive), so a primitive can check a feature on every
// constructor or first use without a round trip each time. Failed probes
// are not cached, so a later call retries.
//
// A FeatureCache describes one deployment: share it only between clients
// of the same server or Cluster. The zero value is ready to use; it must
// not be copied after first use. Safe for concurrent use; concurrent first
// calls for one command may each probe.
type FeatureCache struct {
	mu  sync.Mutex
	has map[string]bool
}

// Has returns the cached result for f.Command, or probes the server behind
// c (blocking one round trip) and caches the result when the probe
// succeeds. Errors are those of [Probe].
func (fc *FeatureCache) Has(ctx context.Context, c rueidis.Client, f Feature) (bool, error) {
	key := strings.ToUpper(f.Command)
	fc.mu.Lock()
	v, ok := fc.has[key]
	fc.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := Probe(ctx, c, f)
	if err != nil {
		return false, err
	}
	fc.mu.Lock()
	if fc.has == nil {
		fc.has = make(map[string]bool)
	}
	fc.has[key] = v
	fc.mu.Unlock()
	return v, nil
}

// Require returns nil when the server has f, a *UnsupportedError (matching
// ErrUnsupported) when it does not, or the probe's error. Call it before
// the first write that needs the feature. Blocking and caching as for Has.
func (fc *FeatureCache) Require(ctx context.Context, c rueidis.Client, f Feature) error {
	ok, err := fc.Has(ctx, c, f)
	if err != nil {
		return err
	}
	if !ok {
		return &UnsupportedError{Feature: f.Name, Command: f.Command, Minimum: f.Minimum}
	}
	return nil
}
