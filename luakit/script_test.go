package luakit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// scriptServer is a fake server's script cache that records every command: EVAL / EVAL_RO cache the
// script under a made-up digest (this fake computes no SHA-1) and answer "ok", EVALSHA / EVALSHA_RO
// answer NOSCRIPT unless cached, SCRIPT LOAD caches and answers the digest, the digest script answers
// the digest of its ARGV[1]. Real servers are in integration/luakit and integration/fips.
type scriptServer struct {
	rueidis.Client
	t          *testing.T
	mu         sync.Mutex
	digests    map[string]string // source -> made-up digest
	cached     map[string]bool   // digests in the cache
	sent       [][]string
	refuseLoad bool   // SCRIPT LOAD answers NOPERM
	loadReply  string // SCRIPT LOAD answers this instead of the digest when set
	failEval   error  // the script's EVAL fails with this when set
	tryAgain   int    // the next tryAgain calls of a script (EVAL, EVALSHA) answer TRYAGAIN
	onTryAgain func() // called (with the lock held) after each TRYAGAIN answer when set
}

func newScriptServer(t *testing.T) *scriptServer {
	return &scriptServer{t: t, digests: map[string]string{}, cached: map[string]bool{}}
}

func (f *scriptServer) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (f *scriptServer) B() rueidis.Builder       { return rueidis.Builder{} }

func (f *scriptServer) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	res := make([]rueidis.RedisResult, len(cmds))
	for i, cmd := range cmds {
		res[i] = f.Do(ctx, cmd)
	}
	return res
}

func (f *scriptServer) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	w := append([]string(nil), cmd.Commands()...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, w)
	ok := func(s string) rueidis.RedisResult { return rueidis.NewResult(str(f.t, s), nil) }
	switch w[0] + " " + w[1] {
	case "EVAL " + digestScript, "EVAL_RO " + digestScript:
		return ok(f.digest(w[3]))
	case "SCRIPT LOAD":
		if f.refuseLoad {
			return rueidis.NewErrorResult(redisErr(f.t, "NOPERM User app has no permissions to run the 'script|load' command"))
		}
		f.cached[f.digest(w[2])] = true
		if f.loadReply != "" {
			return ok(f.loadReply)
		}
		return ok(f.digest(w[2]))
	case "CLIENT CACHING":
		return ok("OK")
	}
	if f.tryAgain > 0 && strings.HasPrefix(w[0], "EVAL") {
		f.tryAgain--
		if f.onTryAgain != nil {
			f.onTryAgain()
		}
		return rueidis.NewErrorResult(redisErr(f.t, "TRYAGAIN Multiple keys request during rehashing of slot"))
	}
	switch w[0] {
	case "EVAL", "EVAL_RO":
		if f.failEval != nil {
			return rueidis.NewErrorResult(f.failEval)
		}
		f.cached[f.digest(w[1])] = true
		return ok("ok")
	case "EVALSHA", "EVALSHA_RO":
		if f.cached[w[1]] {
			return ok("ok")
		}
		return rueidis.NewErrorResult(redisErr(f.t, "NOSCRIPT No matching script. Please use EVAL."))
	}
	f.t.Errorf("unexpected command %q", w)
	return rueidis.NewErrorResult(errors.New("unexpected command"))
}

// digestOf returns src's made-up digest (40 hex digits, distinct per source).
func (f *scriptServer) digestOf(src string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.digest(src)
}

// digest is digestOf, called with f.mu held.
func (f *scriptServer) digest(src string) string {
	d, ok := f.digests[src]
	if !ok {
		d = fmt.Sprintf("%040x", len(f.digests)+1)
		f.digests[src] = d
	}
	return d
}

// take returns the commands sent since the last take, each as its words joined by spaces.
func (f *scriptServer) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.sent))
	for i, w := range f.sent {
		out[i] = fmt.Sprint(w)
	}
	f.sent = nil
	return out
}

func (f *scriptServer) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cached)
}

// TestScriptLearnsDigest: the first call is EVAL, then SCRIPT LOAD tells the digest; from then on a
// call is one EVALSHA, and NOSCRIPT (a flushed cache) falls back to EVAL without asking again.
func TestScriptLearnsDigest(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s := NewScript("t", "return ARGV[1]")
	require.Empty(t, s.SHA1())

	require.NoError(t, s.Exec(ctx, f, nil, []string{"a"}).Error())
	d := f.digestOf(s.Source())
	require.Equal(t, []string{"[EVAL return ARGV[1] 0 a]", "[SCRIPT LOAD return ARGV[1]]"}, f.take())
	require.Equal(t, d, s.SHA1())

	require.NoError(t, s.Exec(ctx, f, nil, []string{"b"}).Error())
	require.Equal(t, []string{"[EVALSHA " + d + " 0 b]"}, f.take())

	f.flush()
	require.NoError(t, s.Exec(ctx, f, nil, []string{"c"}).Error())
	require.Equal(t, []string{"[EVALSHA " + d + " 0 c]", "[EVAL return ARGV[1] 0 c]"}, f.take())
	require.NoError(t, s.Exec(ctx, f, nil, []string{"d"}).Error())
	require.Equal(t, []string{"[EVALSHA " + d + " 0 d]"}, f.take())
}

// TestScriptDigestWithoutScriptLoad: when SCRIPT LOAD is refused (an ACL allowing the script
// commands only), the digest script asks with the command the script runs with.
func TestScriptDigestWithoutScriptLoad(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		s    *Script
		eval string
	}{
		{NewScript("rw", "return 1"), "EVAL"},
		{NewReadOnlyScript("ro", "return 2"), "EVAL_RO"},
	} {
		t.Run(tt.s.Name(), func(t *testing.T) {
			f := newScriptServer(t)
			f.refuseLoad = true
			require.NoError(t, tt.s.Exec(ctx, f, nil, nil).Error())
			src := tt.s.Source()
			require.Equal(t, []string{
				"[" + tt.eval + " " + src + " 0]",
				"[SCRIPT LOAD " + src + "]",
				"[" + tt.eval + " " + digestScript + " 0 " + src + "]",
			}, f.take())
			require.Equal(t, f.digestOf(src), tt.s.SHA1())
			require.NoError(t, tt.s.Exec(ctx, f, nil, nil).Error())
			require.Equal(t, []string{"[" + tt.eval[:4] + "SHA" + tt.eval[4:] + " " + tt.s.SHA1() + " 0]"}, f.take())
		})
	}
}

// TestScriptLearnsOnlyFromGoodReplies: a failed EVAL asks nothing, and a reply that is not a digest
// is not kept; the next call asks again.
func TestScriptLearnsOnlyFromGoodReplies(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s := NewScript("t", "return 1")
	f.failEval = errors.New("connection reset")
	require.Error(t, s.Exec(ctx, f, nil, nil).Error())
	require.Equal(t, []string{"[EVAL return 1 0]"}, f.take())
	require.Empty(t, s.SHA1())

	f.failEval, f.loadReply = nil, "not a digest"
	require.NoError(t, s.Exec(ctx, f, nil, nil).Error())
	require.Equal(t, []string{"[EVAL return 1 0]", "[SCRIPT LOAD return 1]"}, f.take())
	require.Empty(t, s.SHA1())

	f.loadReply = ""
	require.NoError(t, s.Exec(ctx, f, nil, nil).Error())
	require.Equal(t, []string{"[EVAL return 1 0]", "[SCRIPT LOAD return 1]"}, f.take())
	require.Equal(t, f.digestOf(s.Source()), s.SHA1())
}

// TestScriptExecMultiLearnsDigest: a batch before the digest is known is one EVAL per element, then
// one SCRIPT LOAD; the next batch is EVALSHA only; NOSCRIPT elements are sent again with EVAL.
func TestScriptExecMultiLearnsDigest(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s := NewScript("t", "return 1")
	batch := []rueidis.LuaExec{{Args: []string{"a"}}, {Args: []string{"b"}}}
	for _, r := range s.ExecMulti(ctx, f, batch...) {
		require.NoError(t, r.Error())
	}
	require.Equal(t, []string{"[EVAL return 1 0 a]", "[EVAL return 1 0 b]", "[SCRIPT LOAD return 1]"}, f.take())
	d := s.SHA1()
	require.Equal(t, f.digestOf(s.Source()), d)

	for _, r := range s.ExecMulti(ctx, f, batch...) {
		require.NoError(t, r.Error())
	}
	require.Equal(t, []string{"[EVALSHA " + d + " 0 a]", "[EVALSHA " + d + " 0 b]"}, f.take())

	f.flush()
	for _, r := range s.ExecMulti(ctx, f, batch...) {
		require.NoError(t, r.Error())
	}
	require.Equal(t, []string{"[EVALSHA " + d + " 0 a]", "[EVALSHA " + d + " 0 b]",
		"[EVAL return 1 0 a]", "[EVAL return 1 0 b]"}, f.take())
}

// TestScriptExecOrderedLearnsDigest: ExecOrdered and ExecOrderedTracked learn the digest the same way,
// their keys sent as arguments (no slot).
func TestScriptExecOrderedLearnsDigest(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s := NewScript("t", "return KEYS[1]")
	require.NoError(t, s.ExecOrdered(ctx, f, []string{"k"}, []string{"a"}).Error())
	require.Equal(t, []string{"[EVAL return KEYS[1] 1 k a]", "[SCRIPT LOAD return KEYS[1]]"}, f.take())
	d := s.SHA1()
	require.NotEmpty(t, d)
	require.NoError(t, s.ExecOrdered(ctx, f, []string{"k"}, nil).Error())
	require.Equal(t, []string{"[EVALSHA " + d + " 1 k]"}, f.take())

	tracked := NewScript("tracked", "return 2")
	resp, ok := tracked.ExecOrderedTracked(ctx, f, []string{"k"}, nil)
	require.NoError(t, resp.Error())
	require.True(t, ok)
	require.Equal(t, []string{"[CLIENT CACHING YES]", "[EVAL return 2 1 k]", "[SCRIPT LOAD return 2]"}, f.take())
	d = tracked.SHA1()
	require.NotEmpty(t, d)
	f.flush()
	resp, ok = tracked.ExecOrderedTracked(ctx, f, []string{"k"}, nil)
	require.NoError(t, resp.Error())
	require.True(t, ok)
	require.Equal(t, []string{"[CLIENT CACHING YES]", "[EVALSHA " + d + " 1 k]",
		"[CLIENT CACHING YES]", "[EVAL return 2 1 k]"}, f.take())
}

// TestScriptFirstCallsConcurrent: many first calls at once learn the digest with one SCRIPT LOAD.
func TestScriptFirstCallsConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newScriptServer(t)
	s := NewScript("t", "return 1")
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if err := s.Exec(ctx, f, nil, nil).Error(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	loads := 0
	for _, c := range f.take() {
		if c == "[SCRIPT LOAD return 1]" {
			loads++
		}
	}
	require.Equal(t, 1, loads)
	require.Equal(t, f.digestOf(s.Source()), s.SHA1())
}
