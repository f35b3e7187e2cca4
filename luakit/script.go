package luakit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Script is a named Lua script run with EVALSHA and, when the server replies NOSCRIPT (a restart, a
// failover, SCRIPT FLUSH, another Cluster node), EVAL with the full source.
//
// The digest EVALSHA needs is learned from the server, never computed here (no SHA-1 in the client:
// Coordkit works with GODEBUG=fips140=only). Until a server has reported it, calls send EVAL, and
// the first one that succeeds then asks that server for it: SCRIPT LOAD or, when SCRIPT LOAD is
// refused (an ACL that allows only the script commands), an EVAL of redis.sha1hex. From then on every
// call is one EVALSHA. The digest is the same on every server.
//
// Keys always go in KEYS and values in ARGV; a Script's source is fixed at
// construction and never has data concatenated into it.
//
// A *Script is safe for concurrent use by multiple goroutines. Build it once
// (typically in a package-level var with [MustLoad]) and reuse it. The zero
// value is not usable; use [NewScript] or [MustLoad].
type Script struct {
	name     string
	source   string
	readOnly bool
	digest   atomic.Pointer[string] // as a server reported it; nil until then
	learning atomic.Bool            // a call is asking a server for the digest
}

// NewScript returns a Script called name (used only in diagnostics, never
// sent to the server) whose Lua source is source. It does no I/O and never
// fails; a syntax error in source surfaces as a server error reply from the
// first Exec.
func NewScript(name, source string) *Script {
	return &Script{name: name, source: source}
}

// NewReadOnlyScript is [NewScript] for a script that writes nothing, run with EVALSHA_RO and, on
// NOSCRIPT, EVAL_RO (Redis 7.0+, Valkey 7.2+): a read-only ACL user (EVALSHA_RO / EVAL_RO only) may run it,
// and a Cluster client may send it to a replica. Its replies are as for [Script.Exec], a NOPERM one a
// [*PermissionError]. [Script.ExecMulti] and [Script.ExecOrdered] send the read-write forms.
func NewReadOnlyScript(name, source string) *Script {
	return &Script{name: name, source: source, readOnly: true}
}

// MustLoad reads the file "<name>.lua" from fsys (typically an embed.FS declared with //go:embed
// *.lua) and returns NewScript(name, source) with source prepared as [WithACLPreamble] and
// [WithPrelude] do, and with the functions it calls from the module's own prelude: a file
// "prelude.lua" in fsys, when there is one, whose "local function" blocks are read as [Prelude]'s are
// (one "local function <name>(" line, ending at a line "end"; they may call Prelude's functions).
//
// It panics if the file is missing, unreadable or empty (only white space), if prelude.lua has a
// function that does not end, or if the script calls luakit_acl with an argument that is not a table
// constructor on one line: it is meant for package initialisation, where such a failure is a
// programming error caught by any test that imports the package.
func MustLoad(fsys fs.FS, name string) *Script {
	b, err := fs.ReadFile(fsys, name+".lua")
	if err != nil {
		panic(fmt.Sprintf("luakit: load script %q: %v", name, err))
	}
	if strings.TrimSpace(string(b)) == "" {
		panic(fmt.Sprintf("luakit: load script %q: %s.lua is empty", name, name))
	}
	var local []luaFunc
	if p, err := fs.ReadFile(fsys, "prelude.lua"); err == nil && name != "prelude" {
		if local, err = parseFuncs("prelude.lua", string(p)); err != nil {
			panic(fmt.Sprintf("luakit: load script %q: %v", name, err))
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		panic(fmt.Sprintf("luakit: load script %q: %v", name, err))
	}
	src, ok := withACLPreamble(string(b), preludeFor(string(b), local))
	if !ok {
		panic(fmt.Sprintf("luakit: load script %q: a luakit_acl call whose arguments are not one table constructor each", name))
	}
	return NewScript(name, src)
}

// ACLPreamble is the Lua source of the function luakit_acl, which a script calls before its first
// write with one table per command it may run ({'pexpire', KEYS[1], '1'}, ...): it checks each with
// redis.acl_check_cmd (Redis 7.0 and later, every Valkey) and raises
// "NOPERM this user has no permissions to run the '<cmd>' command this script needs" for the first
// one the caller's user may not run, so a script refused by the ACL writes nothing. The reply then
// matches [ErrNoPermission] through [Script]. [WithACLPreamble] puts the checks inline in front of
// each call, so that a permitted script pays one ACL lookup per command (no I/O) and calls the
// function only when a check fails.
//
//go:embed acl.lua
var ACLPreamble string

// WithACLPreamble returns source with [ACLPreamble] inserted after its leading comment lines and each
// statement luakit_acl({...}, ...) of source rewritten to
//
//	if not (redis.acl_check_cmd(...) and ...) then luakit_acl({...}, ...) end
//
// (the same checks written out, on the call's own lines, so line numbers in error replies stay those
// of source): a permitted script builds no tables and makes no function call, which costs a few
// microseconds of server time per call otherwise. Source that does not call luakit_acl is returned
// unchanged. A call whose arguments are not all table constructors is left as it is (it still checks,
// at the function's cost); [MustLoad] panics on one. MustLoad applies WithACLPreamble; call it when
// building a script from a string.
func WithACLPreamble(source string) string {
	out, _ := withACLPreamble(source, "")
	return out
}

// withACLPreamble is WithACLPreamble, with defs (prelude functions) inserted after the preamble (after
// the leading comment lines when source calls no luakit_acl), also reporting whether every call was
// put inline.
func withACLPreamble(source, defs string) (string, bool) {
	// After the script's leading comment block, so its header stays the first thing of the source.
	i := headerEnd(source)
	if !strings.Contains(source, "luakit_acl(") {
		if defs == "" {
			return source, true
		}
		return source[:i] + defs + source[i:], true
	}
	body, ok := inlineACLChecks(source[i:])
	return source[:i] + ACLPreamble + defs + body, ok
}

// inlineACLChecks rewrites each call luakit_acl(t1, t2, ...) outside comments and strings of body,
// every ti a table constructor {...}, to "if not (redis.acl_check_cmd(<t1's fields>) and ...) then
// <the call> end". It reports false when some call had another argument (left as it is).
func inlineACLChecks(body string) (string, bool) {
	const name = "luakit_acl("
	var b strings.Builder
	ok := true
	last := 0
	for i := 0; i < len(body); {
		switch c := body[i]; {
		case c == '\'' || c == '"':
			i = skipLuaString(body, i)
		case c == '-' && strings.HasPrefix(body[i:], "--"):
			if j := strings.IndexByte(body[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(body)
			}
		case strings.HasPrefix(body[i:], name) && (i == 0 || !isLuaNameByte(body[i-1])):
			end, fields := parseACLCall(body, i+len(name))
			if fields == nil {
				ok = false
				i += len(name)
				continue
			}
			b.WriteString(body[last:i])
			b.WriteString("if not (")
			for k, f := range fields {
				if k > 0 {
					b.WriteString(" and ")
				}
				b.WriteString("redis.acl_check_cmd(")
				b.WriteString(f)
				b.WriteString(")")
			}
			b.WriteString(") then ")
			b.WriteString(body[i:end])
			b.WriteString(" end")
			i, last = end, end
		default:
			i++
		}
	}
	if last == 0 {
		return body, ok
	}
	b.WriteString(body[last:])
	return b.String(), ok
}

// parseACLCall reads the arguments of a luakit_acl call from body[i:] (just after its "("): it returns
// the index just after the closing ")" and the text inside each table constructor, or nil fields when
// an argument is not a table constructor or the call does not end.
func parseACLCall(body string, i int) (int, []string) {
	var fields []string
	for i < len(body) {
		switch c := body[i]; c {
		case ' ', '\t', '\r', '\n', ',':
			i++
		case ')':
			if len(fields) == 0 {
				return 0, nil
			}
			return i + 1, fields
		case '{':
			start, depth := i+1, 1
			for i++; i < len(body) && depth > 0; {
				switch body[i] {
				case '\'', '"':
					i = skipLuaString(body, i)
					continue
				case '{', '(', '[':
					depth++
				case '}', ')', ']':
					depth--
				case '\n':
					return 0, nil // one table per line keeps the rewrite on the call's lines
				}
				i++
			}
			if depth != 0 || body[i-1] != '}' {
				return 0, nil
			}
			f := strings.TrimSpace(body[start : i-1])
			if f == "" {
				return 0, nil
			}
			fields = append(fields, f)
		default:
			return 0, nil
		}
	}
	return 0, nil
}

// skipLuaString returns the index just after the quoted Lua string starting at body[i] (its quote).
func skipLuaString(body string, i int) int {
	q := body[i]
	for i++; i < len(body); i++ {
		switch body[i] {
		case '\\':
			i++
		case q, '\n':
			return i + 1
		}
	}
	return len(body)
}

// isLuaNameByte reports whether c may be part of a Lua name.
func isLuaNameByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == ':'
}

// Name returns the name given to NewScript or MustLoad.
func (s *Script) Name() string { return s.name }

// Source returns the Lua source sent to the server (for MustLoad, with the ACL preamble when used).
func (s *Script) Source() string { return s.source }

// SHA1 returns the lowercase hex SHA-1 digest of the source as a server reported it, the value
// EVALSHA sends, or "" until a call of the script has learned it (see [Script]). Useful for
// diagnostics.
func (s *Script) SHA1() string {
	if d := s.digest.Load(); d != nil {
		return *d
	}
	return ""
}

// Exec runs the script on c with the given KEYS and ARGV, blocking until the
// reply arrives or ctx ends. It sends EVALSHA and falls back to EVAL when the
// server does not know the script (EVAL alone until the digest is known; see [Script]).
//
// On a Cluster client every key must hash to the same slot (check with
// [CheckSameSlot] before calling). Errors are carried in the returned
// result: server error replies as *rueidis.RedisError, transport and
// context errors as is; [Classify] sorts them. A script that fails midway is
// not rolled back by the server, so scripts should validate before writing.
// A NOPERM reply comes back as a [*PermissionError] (matching [ErrNoPermission]).
// A Cluster node's TRYAGAIN reply (the slot migrates and the keys are split
// between two nodes; nothing ran) is not returned at once: the call is sent
// again, with backoff, for up to [TryAgainBudget] within ctx.
// Safe for concurrent use.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	return permResult(s.run(ctx, c, s.readOnly, true, keys, args))
}

// ExecMulti runs the script once per element of multi, pipelined on c, and returns one result per
// element in the same order (see [Script.Exec] for errors). Each execution is atomic on its own; the
// batch as a whole is not. It blocks until every reply arrives or ctx ends. Safe for concurrent use.
//
// It costs one round trip when the server has the script cached: one EVALSHA per element sent
// together with DoMulti (on Cluster, each node gets its elements together), and no SCRIPT LOAD (until
// the digest is known, learned after the batch, every element is sent with EVAL). Elements that ran
// nothing are sent again in a later pipelined round trip: those answered NOSCRIPT (a restart, a
// failover, SCRIPT FLUSH, another Cluster node) with EVAL, and those a Cluster node answered TRYAGAIN
// together, with backoff, for up to [TryAgainBudget] within ctx. Re-sent elements run after the
// others, so elements that touch the same key may then apply out of input order.
func (s *Script) ExecMulti(ctx context.Context, c rueidis.Client, multi ...rueidis.LuaExec) []rueidis.RedisResult {
	if len(multi) == 0 {
		return nil
	}
	res := s.sendMulti(ctx, c, multi, nil, nil)
	retryMulti(ctx, res, func(idx []int) { s.sendMulti(ctx, c, multi, idx, res) })
	for i := range res {
		res[i] = permResult(res[i])
	}
	return res
}

// sendMulti sends the elements idx of multi (all of them when idx is nil) pipelined with DoMulti, with
// EVALSHA of the known digest (EVAL until it is known, learning it after the batch) and the elements
// answered NOSCRIPT again with EVAL, and stores each element's result at its index in res (a new
// slice when res is nil), which it returns.
func (s *Script) sendMulti(ctx context.Context, c rueidis.Client, multi []rueidis.LuaExec, idx []int, res []rueidis.RedisResult) []rueidis.RedisResult {
	at := func(j int) int {
		if idx == nil {
			return j
		}
		return idx[j]
	}
	n := len(multi)
	if idx != nil {
		n = len(idx)
	}
	digest := s.SHA1()
	cmds := make(rueidis.Commands, n)
	for j := range cmds {
		m := multi[at(j)]
		cmds[j] = s.command(c.B(), digest, false, true, m.Keys, m.Args)
	}
	got := c.DoMulti(ctx, cmds...)
	if res == nil {
		res = got // idx is nil: got is in input order
	} else {
		for j, x := range got {
			res[idx[j]] = x
		}
	}
	var noScript []int
	learn := false
	for j := range n {
		switch err := res[at(j)].Error(); {
		case digest == "" && err == nil:
			learn = true
		case digest != "" && isNoScript(err):
			noScript = append(noScript, at(j))
		}
	}
	if learn {
		s.learn(ctx, c)
	}
	if len(noScript) > 0 {
		evals := make(rueidis.Commands, len(noScript))
		for j, i := range noScript {
			evals[j] = s.command(c.B(), "", false, true, multi[i].Keys, multi[i].Args)
		}
		for j, x := range c.DoMulti(ctx, evals...) {
			res[noScript[j]] = x
		}
	}
	return res
}

// ExecOrdered is [Script.Exec] for calls whose order on the server matters even after the caller gave
// up on an earlier one, such as an owner-checked cleanup sent after a write whose reply timed out. On
// a standalone or Sentinel client it sends every call on the client's first pipelined connection, so
// ExecOrdered calls that reach its queue one after another through the same client run on the server
// in that order: the cleanup runs after the late write, never before it. On a Cluster client it is
// Exec. Pair it with [WithoutDeadline]. Why Exec does not keep the order, and where ExecOrdered's does
// not hold (Cluster, DisableAutoPipelining, a broken connection): see the package documentation,
// "Command order and deadlines".
//
// Replies, errors and the EVALSHA-then-EVAL fallback are as for Exec. It blocks until the reply
// arrives or ctx ends. Safe for concurrent use. A call answered TRYAGAIN (see [TryAgainBudget]) is
// sent again the same way, after its TRYAGAIN reply was read: the server ran nothing, and since the
// call has not returned, nothing its caller sends next can reach the server before it.
func (s *Script) ExecOrdered(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	if c.Mode() == rueidis.ClientModeCluster {
		return s.Exec(ctx, c, keys, args)
	}
	// Keys go through Arg so the command keeps the builder's NoSlot, which rueidis' standalone
	// multiplexer always sends on its first connection; the bytes sent are the same as Exec's.
	return permResult(s.run(ctx, c, false, false, keys, args))
}

// ExecOrderedTracked is [Script.ExecOrdered] preceded on the same connection by CLIENT CACHING YES, so
// that the keys the script reads with read-only commands (GET, PTTL...) are tracked for this client
// (RESP3 client-side caching in rueidis' default OPTIN mode): the next change of such a key, or its
// expiry, produces an invalidation that a [Tracker] turns into a wake-up, with no separate arming read
// ([ArmTracked]) and its round trip. tracked reports whether the server accepted CLIENT CACHING YES;
// it is false on a Cluster client (the two commands could reach different nodes: the script then runs
// as ExecOrdered), on RESP2, with DisableCache, or with tracking options other than OPTIN; arm with
// ArmTracked then. Keys written but not read by the script are not tracked.
//
// Both commands are sent pipelined, on the connection ExecOrdered uses, even with
// DisableAutoPipelining (the pipelined connection is the one whose invalidations are read as they
// arrive). Replies, errors, the EVALSHA-then-EVAL fallback and the re-sends after TRYAGAIN (both
// commands again) are as for ExecOrdered. Safe for concurrent use.
func (s *Script) ExecOrderedTracked(ctx context.Context, c rueidis.Client, keys, args []string) (resp rueidis.RedisResult, tracked bool) {
	if c.Mode() == rueidis.ClientModeCluster {
		return s.Exec(ctx, c, keys, args), false
	}
	send := func(digest string) (rueidis.RedisResult, bool) {
		res := c.DoMulti(ctx,
			c.B().ClientCaching().Yes().Build().ToPipe(),
			s.command(c.B(), digest, false, false, keys, args).ToPipe())
		return res[1], res[0].Error() == nil
	}
	var r tryAgain
	for {
		digest := s.SHA1()
		resp, tracked = send(digest)
		if s.settle(ctx, c, digest, resp.Error()) {
			resp, tracked = send("")
		}
		if again, ended := r.wait(ctx, resp.Error()); !again {
			if ended != nil {
				return rueidis.NewErrorResult(ended), false
			}
			return permResult(resp), tracked
		}
	}
}

// run sends one call of the script with Do (see settle), in the read-only forms when ro; slotted
// passes keys with Key, so the command carries their slot, instead of Arg (see ExecOrdered).
// A call answered TRYAGAIN is sent again the same way (see [TryAgainBudget]).
func (s *Script) run(ctx context.Context, c rueidis.Client, ro, slotted bool, keys, args []string) rueidis.RedisResult {
	var r tryAgain
	for {
		digest := s.SHA1()
		resp := c.Do(ctx, s.command(c.B(), digest, ro, slotted, keys, args))
		if s.settle(ctx, c, digest, resp.Error()) {
			resp = c.Do(ctx, s.command(c.B(), "", ro, slotted, keys, args))
		}
		if again, ended := r.wait(ctx, resp.Error()); !again {
			if ended != nil {
				return rueidis.NewErrorResult(ended)
			}
			return resp
		}
	}
}

// settle handles the outcome err of a call sent with digest ("": with EVAL): it learns the digest
// after an EVAL that succeeded, and reports whether the call must be sent again with EVAL (an
// EVALSHA answered NOSCRIPT).
func (s *Script) settle(ctx context.Context, c rueidis.Client, digest string, err error) (again bool) {
	if digest != "" {
		return isNoScript(err)
	}
	if err == nil {
		s.learn(ctx, c)
	}
	return false
}

// command builds one call of the script: EVALSHA of digest, or EVAL of the source when digest is "";
// EVALSHA_RO / EVAL_RO when ro. With slotted, keys go in with Key (the command carries their slot);
// otherwise with Arg (the builder's slot stays: NoSlot on a standalone client).
func (s *Script) command(b rueidis.Builder, digest string, ro, slotted bool, keys, args []string) rueidis.Completed {
	n := int64(len(keys))
	switch {
	case ro && digest != "":
		return b.EvalshaRo().Sha1(digest).Numkeys(n).Key(keys...).Arg(args...).Build()
	case ro:
		return b.EvalRo().Script(s.source).Numkeys(n).Key(keys...).Arg(args...).Build()
	case digest != "" && slotted:
		return b.Evalsha().Sha1(digest).Numkeys(n).Key(keys...).Arg(args...).Build()
	case digest != "":
		return b.Evalsha().Sha1(digest).Numkeys(n).Arg(keys...).Arg(args...).Build()
	case slotted:
		return b.Eval().Script(s.source).Numkeys(n).Key(keys...).Arg(args...).Build()
	default:
		return b.Eval().Script(s.source).Numkeys(n).Arg(keys...).Arg(args...).Build()
	}
}

// digestScript returns the SHA-1 digest of ARGV[1] computed by the server: how a script learns its
// digest when SCRIPT LOAD is refused.
const digestScript = "return redis.sha1hex(ARGV[1])"

// learn asks c's server for the script's digest, after an EVAL of it succeeded there, and keeps a
// well-formed answer. It sends SCRIPT LOAD; when the server refuses it with an error reply (an ACL that
// allows the script commands only, a renamed command), it sends the digest script with the command
// the script runs with (EVAL, or EVAL_RO for a read-only script). One call asks at a time; the others
// go on with EVAL meanwhile. A failure leaves the digest unknown, and a later call asks again.
func (s *Script) learn(ctx context.Context, c rueidis.Client) {
	if s.digest.Load() != nil || !s.learning.CompareAndSwap(false, true) {
		return
	}
	defer s.learning.Store(false)
	if s.digest.Load() != nil { // learned by the call that held the flag before
		return
	}
	d, err := c.Do(ctx, c.B().ScriptLoad().Script(s.source).Build()).ToString()
	if _, refused := rueidis.IsRedisErr(err); refused {
		cmd := c.B().Eval().Script(digestScript).Numkeys(0).Arg(s.source).Build()
		if s.readOnly {
			cmd = c.B().EvalRo().Script(digestScript).Numkeys(0).Arg(s.source).Build()
		}
		d, err = c.Do(ctx, cmd).ToString()
	}
	if err == nil && isDigest(d) {
		s.digest.Store(&d)
	}
}

// isDigest reports whether d is 40 lowercase hex digits, as SCRIPT LOAD and redis.sha1hex answer.
func isDigest(d string) bool {
	if len(d) != 40 {
		return false
	}
	for i := range len(d) {
		if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isNoScript reports whether err is a NOSCRIPT reply: the server does not have the script cached.
func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}
