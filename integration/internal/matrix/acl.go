package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// ClientACL is what every Coordkit client needs on top of a primitive's commands: the connection
// handshake rueidis sends (HELLO, CLIENT SETINFO, PING), client-side caching for tracker wake-ups
// (CLIENT TRACKING, CLIENT CACHING, MULTI, EXEC) and, on Cluster, the topology reads (CLUSTER SLOTS,
// CLUSTER SHARDS) and, through Sentinel, ROLE.
var ClientACL = []string{
	"+hello", "+ping", "+client|setinfo", "+client|tracking", "+client|caching", "+multi", "+exec",
	"+cluster|slots", "+cluster|shards", "+readonly", "+role",
}

// KeyState is one key as DUMP and PTTL see it.
type KeyState struct {
	Dump []byte
	PTTL int64
}

// ACLUser creates (or resets) user name on every server process of the target with rules (after
// "reset on nopass") and returns a client option that authenticates as it, client-side caching off.
// The user is deleted at t's cleanup.
func (e *Env) ACLUser(t testing.TB, name string, rules ...string) rueidis.ClientOption {
	t.Helper()
	args := append([]string{"reset", "on", "nopass"}, rules...)
	for _, n := range e.Nodes {
		c := e.nodeClient(t, n.ClientOption())
		rs := args
		for {
			err := c.Do(Ctx(t), c.B().AclSetuser().Username(name).Rule(rs...).Build()).Error()
			if err == nil {
				break
			}
			// A command this server does not have (CLIENT SETINFO before Redis 7.2): drop that rule.
			bad, ok := unknownRule(err.Error())
			if !ok || !slices.Contains(rs, bad) {
				t.Fatalf("ACL SETUSER %s on %s: %v", name, n.Addr, err)
			}
			rs = slices.DeleteFunc(slices.Clone(rs), func(r string) bool { return r == bad })
		}
		t.Cleanup(func() {
			_ = c.Do(context.Background(), c.B().AclDeluser().Username(name).Build()).Error()
			c.Close()
		})
	}
	opt := e.ClientOption()
	opt.Username, opt.Password = name, "any"
	opt.DisableCache = true
	return opt
}

func (e *Env) nodeClient(t testing.TB, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("node client: %v", err)
	}
	return c
}

// Snapshot returns DUMP and PTTL of every key matching pattern (a SCAN MATCH pattern) on every server
// process of the target.
func (e *Env) Snapshot(t testing.TB, pattern string) map[string]KeyState {
	t.Helper()
	out := map[string]KeyState{}
	for _, n := range e.Nodes {
		c := e.nodeClient(t, n.ClientOption())
		var cursor uint64
		for {
			se, err := c.Do(Ctx(t), c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				c.Close()
				t.Fatalf("SCAN on %s: %v", n.Addr, err)
			}
			for _, k := range se.Elements {
				d, err := c.Do(Ctx(t), c.B().Dump().Key(k).Build()).AsBytes()
				if rueidis.IsRedisNil(err) {
					continue
				}
				if err != nil {
					c.Close()
					t.Fatalf("DUMP: %v", err)
				}
				p, err := c.Do(Ctx(t), c.B().Pttl().Key(k).Build()).AsInt64()
				if err != nil {
					c.Close()
					t.Fatalf("PTTL: %v", err)
				}
				if p > 0 {
					p = 1 // an expiring key: its remaining time moves on its own
				}
				out[k] = KeyState{Dump: d, PTTL: p}
			}
			if se.Cursor == 0 {
				break
			}
			cursor = se.Cursor
		}
		c.Close()
	}
	return out
}

// Without returns rules with cmd removed: "+cmd" dropped and "-cmd" appended.
func Without(rules []string, cmd string) []string {
	out := make([]string, 0, len(rules)+1)
	for _, r := range rules {
		if !strings.EqualFold(r, "+"+cmd) {
			out = append(out, r)
		}
	}
	return append(out, "-"+cmd)
}

// ACLRun is one run of a primitive's operations as one ACL user; see [LeastPrivilege].
type ACLRun struct {
	t       *testing.T
	e       *Env
	pattern string
	// Client authenticates as the run's user.
	Client rueidis.Client
	// Prefix starts every key of this run (within the user's key pattern): use it for the keys of
	// the suite, so that runs do not see each other's keys.
	Prefix  string
	refused []string
}

// Step runs one operation. When it fails it must fail with luakit.ErrNoPermission and leave every key
// matching the run's pattern exactly as before (DUMP and whether it expires); the run then stops
// (Step reports false) since later operations may depend on it.
func (r *ACLRun) Step(name string, op func(ctx context.Context) error) bool {
	r.t.Helper()
	if len(r.refused) > 0 {
		return false
	}
	before := r.e.Snapshot(r.t, r.pattern)
	err := op(Ctx(r.t))
	if err == nil {
		return true
	}
	if !errors.Is(err, luakit.ErrNoPermission) {
		r.t.Fatalf("step %s: want an error matching ErrNoPermission, got %v", name, err)
	}
	after := r.e.Snapshot(r.t, r.pattern)
	if diff := diffSnapshots(before, after); diff != "" {
		r.t.Fatalf("step %s refused (%v) but changed the keyspace: %s", name, err, diff)
	}
	r.refused = append(r.refused, name)
	return false
}

func diffSnapshots(a, b map[string]KeyState) string {
	var d []string
	for k, v := range a {
		w, ok := b[k]
		switch {
		case !ok:
			d = append(d, "deleted "+k)
		case !bytes.Equal(v.Dump, w.Dump):
			d = append(d, "changed "+k)
		case v.PTTL != w.PTTL:
			d = append(d, fmt.Sprintf("expiry of %s %d -> %d", k, v.PTTL, w.PTTL))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, "created "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}

// LeastPrivilege runs suite once as a user with exactly rules (every step must succeed), then once
// per command of commands as a user whose rules lack only that command (some step must be refused
// with ErrNoPermission and nothing written by it). keys is the user's key pattern and the pattern of
// the snapshots (for example "acl:lock:*"); a command in commands that no step needs fails the test,
// so the documented ACL lists no command the primitive does not use.
func (e *Env) LeastPrivilege(t *testing.T, user, keys string, rules, commands []string, suite func(t *testing.T, r *ACLRun)) {
	t.Helper()
	full := append(append([]string{"~" + keys}, ClientACL...), rules...)
	run := func(t *testing.T, rs []string) *ACLRun {
		e.flushScripts(t) // a cold script cache: EVALSHA then EVAL, as after a restart
		opt := e.ACLUser(t, user, rs...)
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatalf("client as %s: %v", user, err)
		}
		t.Cleanup(c.Close)
		prefix := strings.TrimSuffix(keys, "*") + strings.ReplaceAll(t.Name(), "/", ".") + ":"
		r := &ACLRun{t: t, e: e, pattern: prefix + "*", Client: c, Prefix: prefix}
		suite(t, r)
		return r
	}
	learnt := false // the scripts' digests are known to this process (sent as EVALSHA, not EVAL)
	t.Run("exact", func(t *testing.T) {
		learnt = true
		if r := run(t, full); len(r.refused) > 0 {
			t.Fatalf("with the documented ACL, step %s was refused", r.refused[0])
		}
	})
	for _, cmd := range commands {
		t.Run("without_"+strings.ReplaceAll(cmd, "|", "_"), func(t *testing.T) {
			if !learnt { // run alone: the exact run first, as in the whole suite
				t.Run("exact", func(t *testing.T) { run(t, full) })
				learnt = true
			}
			if r := run(t, Without(full, cmd)); len(r.refused) == 0 {
				t.Fatalf("no step needed %s", cmd)
			}
		})
	}
}

// flushScripts empties the script cache of every server process.
func (e *Env) flushScripts(t testing.TB) {
	t.Helper()
	for _, n := range e.Nodes {
		c := e.nodeClient(t, n.ClientOption())
		t.Cleanup(c.Close) // closed at the end: closing right after the reply raced rueidis' reader
		err := c.Do(Ctx(t), c.B().ScriptFlush().Sync().Build()).Error()
		if err != nil {
			t.Fatalf("SCRIPT FLUSH on %s: %v", n.Addr, err)
		}
	}
}

// unknownRule returns the rule named by an "Unknown command or category" ACL SETUSER error.
func unknownRule(msg string) (string, bool) {
	if !strings.Contains(msg, "Unknown command") {
		return "", false
	}
	_, rest, ok := strings.Cut(msg, "modifier '")
	if !ok {
		return "", false
	}
	rule, _, ok := strings.Cut(rest, "'")
	return rule, ok
}

// DocumentedACL checks that the module README at readme (a path relative to the test's package
// directory) contains line verbatim, and returns the primitive's part of that "ACL SETUSER" line: the
// command rules ("+cmd", those of [ClientACL] left out), ready for [Env.LeastPrivilege], and the
// command names. hasChannels reports whether the line grants a channel pattern ("&...").
func DocumentedACL(t testing.TB, readme, line string) (rules, commands []string, hasChannels bool) {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatalf("read %s: %v", readme, err)
	}
	if !strings.Contains(string(b), line) {
		t.Fatalf("%s does not document the ACL line the test uses:\n%s", readme, line)
	}
	for _, f := range strings.Fields(line) {
		switch {
		case strings.HasPrefix(f, "&"):
			hasChannels = true
		case strings.HasPrefix(f, "+") && !slices.Contains(ClientACL, f):
			rules = append(rules, f)
			commands = append(commands, strings.TrimPrefix(f, "+"))
		}
	}
	if len(commands) == 0 {
		t.Fatalf("no command in %q", line)
	}
	return rules, commands, hasChannels
}
