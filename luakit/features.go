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
	// Argument, when set, is an argument token of Command that only servers with the capability
	// accept, e.g. "IFEQ" of SET: the probe is then COMMAND DOCS <command>, true when the token is
	// among the documented arguments. Empty: the command alone decides.
	Argument string
	// Minimum names the first servers with the feature, for errors.
	Minimum string
}

// HashFieldTTL is per-field expiry in hashes (HPEXPIRE and friends), needed
// by named leases in hash fields: Redis 7.4+ or Valkey 9.0+.
var HashFieldTTL = Feature{Name: "hash-field expiry", Command: "HPEXPIRE", Minimum: "Redis 7.4 or Valkey 9.0"}

// ConditionalSet is SET's IFEQ condition (SET key value IFEQ expected, a compare-and-set of a
// string), which lets an owner-checked renewal run without a script: Valkey 8.1+ or Redis 8.4+.
// Probed with COMMAND DOCS SET (IFEQ is an argument, not a command).
var ConditionalSet = Feature{Name: "conditional SET (IFEQ)", Command: "SET", Argument: "IFEQ", Minimum: "Valkey 8.1 or Redis 8.4"}

// DelIfEq is Valkey's DELIFEQ key value (delete when the string equals value): Valkey 9.0+.
var DelIfEq = Feature{Name: "conditional delete (DELIFEQ)", Command: "DELIFEQ", Minimum: "Valkey 9.0"}

// DelEx is DELEX key IFEQ value (delete when the string equals value): Redis 8.4+ or Valkey 9.2+.
var DelEx = Feature{Name: "conditional delete (DELEX IFEQ)", Command: "DELEX", Argument: "IFEQ", Minimum: "Redis 8.4 or Valkey 9.2"}

// WaitAOF is WAITAOF (acknowledgement of append-only-file fsyncs), needed by a [ReplicaAck] with AOF:
// Redis 7.2+ and Valkey.
var WaitAOF = Feature{Name: "append-only-file acknowledgement", Command: "WAITAOF", Minimum: "Redis 7.2 or Valkey 7.2"}

// Probe reports whether the server behind c knows f.Command, by sending
// COMMAND INFO <command>: a nil or empty entry means false; with
// f.Argument set it sends COMMAND DOCS <command> instead and reports
// whether the argument token is documented. It probes by command, never by
// version string (Valkey 9 reports redis_version 7.2.4 yet has HPEXPIRE).
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
	if f.Argument != "" {
		docs, err := c.Do(ctx, c.B().CommandDocs().CommandName(f.Command).Build()).ToMessage()
		if err != nil {
			return false, fmt.Errorf("luakit: probe %s %s: %w", f.Command, f.Argument, Permission(err))
		}
		doc, ok := docEntry(docs, f.Command)
		return ok && hasToken(doc, f.Argument, 0), nil
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

// docEntry returns the documentation of command (case-insensitive) in a COMMAND DOCS reply: a map
// (RESP3) or a flat array of pairs (RESP2) from command name to documentation, without the commands
// the server does not know.
func docEntry(docs rueidis.RedisMessage, command string) (rueidis.RedisMessage, bool) {
	if entries, err := docs.ToArray(); err == nil {
		for i := 0; i+1 < len(entries); i += 2 {
			if name, err := entries[i].ToString(); err == nil && strings.EqualFold(name, command) {
				return entries[i+1], true
			}
		}
		return rueidis.RedisMessage{}, false
	}
	m, err := docs.ToMap()
	if err != nil {
		return rueidis.RedisMessage{}, false
	}
	for name, doc := range m {
		if strings.EqualFold(name, command) {
			return doc, true
		}
	}
	return rueidis.RedisMessage{}, false
}

// hasToken reports whether msg, a command's documentation, holds a field "token" whose value is token
// (case-insensitive), in a map or in a flat array of pairs, at most 8 levels down.
func hasToken(msg rueidis.RedisMessage, token string, depth int) bool {
	if depth > 8 {
		return false
	}
	if m, err := msg.ToMap(); err == nil {
		for k, v := range m {
			if s, err := v.ToString(); err == nil && k == "token" && strings.EqualFold(s, token) {
				return true
			}
			if hasToken(v, token, depth+1) {
				return true
			}
		}
		return false
	}
	arr, err := msg.ToArray()
	if err != nil {
		return false
	}
	for i, v := range arr {
		if k, err := v.ToString(); err == nil && k == "token" && i+1 < len(arr) {
			if s, err := arr[i+1].ToString(); err == nil && strings.EqualFold(s, token) {
				return true
			}
		}
		if hasToken(v, token, depth+1) {
			return true
		}
	}
	return false
}

// FeatureCache remembers successful [Probe] results per Feature.Command and Feature.Argument
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
	if f.Argument != "" {
		key += " " + strings.ToUpper(f.Argument)
	}
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
