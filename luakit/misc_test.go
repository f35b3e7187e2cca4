package luakit

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOwnerToken(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[0-9a-f]{32}$`)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				tok := OwnerToken()
				if !assert.Regexp(t, re, tok) {
					return
				}
				mu.Lock()
				assert.False(t, seen[tok], "duplicate token")
				seen[tok] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, 8000)
}

func TestScript(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"acquire.lua": {Data: []byte("return redis.call('GET', KEYS[1])\n")},
		"empty.lua":   {Data: []byte(" \n")},
	}
	s := MustLoad(fsys, "acquire")
	assert.Equal(t, "acquire", s.Name())
	assert.Equal(t, "return redis.call('GET', KEYS[1])\n", s.Source())
	assert.Empty(t, s.SHA1(), "no digest before a server reported one")

	assert.PanicsWithValue(t, `luakit: load script "missing": open missing.lua: file does not exist`, func() { MustLoad(fsys, "missing") })
	assert.Panics(t, func() { MustLoad(fsys, "empty") })
}

func TestCommandInfoPresent(t *testing.T) {
	t.Parallel()
	assert.False(t, commandInfoPresent(nil))
	assert.False(t, commandInfoPresent([]rueidis.RedisMessage{msg(t, '_', "", 0)}))
	// A present entry is an array; any non-nil non-empty entry counts.
	assert.True(t, commandInfoPresent([]rueidis.RedisMessage{str(t, "hpexpire")}))
}

func TestFeatureCacheCachedValue(t *testing.T) {
	t.Parallel()
	var fc FeatureCache
	fc.has = map[string]bool{"HPEXPIRE": false, "GET": true}
	ok, err := fc.Has(t.Context(), nil, Feature{Command: "get"})
	require.NoError(t, err)
	assert.True(t, ok)
	err = fc.Require(t.Context(), nil, HashFieldTTL)
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Equal(t, "luakit: server lacks hash-field expiry (HPEXPIRE); requires Redis 7.4 or Valkey 9.0", err.Error())
	require.NoError(t, fc.Require(t.Context(), nil, Feature{Command: "GET"}))

	_, err = Probe(t.Context(), nil, Feature{})
	require.Error(t, err)
}

func TestSharedErrors(t *testing.T) {
	err := InvalidConfig("lock", "retry delay %v must be positive", -1)
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != "lock: retry delay -1 must be positive" {
		t.Fatalf("InvalidConfig = %q (Is ErrInvalidConfig: %v)", err, errors.Is(err, ErrInvalidConfig))
	}
	a, b := OwnerToken(), OwnerToken()
	if len(a) != 32 || a == b {
		t.Fatalf("OwnerToken: %q, %q", a, b)
	}
}

func TestConfigSentinels(t *testing.T) {
	s := ConfigSentinel("m: bad count")
	wrapped := fmt.Errorf("m: %w (got -1)", s)
	for name, err := range map[string]error{"sentinel": wrapped, "ttl": ErrInvalidTTL, "empty key": ValidateKey("key", "")} {
		if !errors.Is(err, ErrInvalidConfig) || Classify(err) != ClassTerminal {
			t.Errorf("%s: %v does not match ErrInvalidConfig as a terminal error", name, err)
		}
	}
	if !errors.Is(wrapped, s) || errors.Is(wrapped, ErrInvalidTTL) {
		t.Fatalf("sentinel identity lost")
	}
	for _, err := range []error{ErrForeignData, ErrClosed, ErrNilClient} {
		if Classify(fmt.Errorf("x: %w", err)) != ClassTerminal {
			t.Errorf("%v is not terminal", err)
		}
	}
}

func TestCrossSlotIsConfig(t *testing.T) {
	err := CheckSameSlot(NamedKey{Role: "a", Key: "a"}, NamedKey{Role: "b", Key: "b"})
	if !errors.Is(err, ErrCrossSlot) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("%v: want ErrCrossSlot and ErrInvalidConfig", err)
	}
}

func TestMarkForeign(t *testing.T) {
	plain := errors.New("x")
	if MarkForeign(plain) != plain || MarkForeign(nil) != nil {
		t.Fatal("MarkForeign changed an error that is not WRONGTYPE")
	}
}

func TestWithACLPreamble(t *testing.T) {
	const check = "redis.acl_check_cmd"
	tests := []struct {
		name, src string
		want      string // after the preamble
		inline    bool
	}{
		{"unused", "-- x: y\nreturn 1\n", "", true},
		{"after header", "-- x: y\n--\nluakit_acl({'get', KEYS[1]})\nreturn 1\n",
			"if not (" + check + "('get', KEYS[1])) then luakit_acl({'get', KEYS[1]}) end\nreturn 1\n", true},
		{"several, over two lines, in a block",
			"if x then\n  luakit_acl({'set', KEYS[1]}, {'time'},\n    {'pexpire', KEYS[1], '1'})\nend\n",
			"if x then\n  if not (" + check + "('set', KEYS[1]) and " + check + "('time') and " + check +
				"('pexpire', KEYS[1], '1')) then luakit_acl({'set', KEYS[1]}, {'time'},\n    {'pexpire', KEYS[1], '1'}) end\nend\n", true},
		{"strings with braces and quotes", `luakit_acl({'spublish', KEYS[1], '}{\'"'})`,
			"if not (" + check + `('spublish', KEYS[1], '}{\'"')) then luakit_acl({'spublish', KEYS[1], '}{\'"'}) end`, true},
		{"nested expression", "luakit_acl({'get', KEYS[tonumber(ARGV[1])]})",
			"if not (" + check + "('get', KEYS[tonumber(ARGV[1])])) then luakit_acl({'get', KEYS[tonumber(ARGV[1])]}) end", true},
		{"comments and strings are not calls", "local a = 1 -- luakit_acl({'get'})\nlocal s = 'luakit_acl({1})'\nmy_luakit_acl({'x'})\n",
			"local a = 1 -- luakit_acl({'get'})\nlocal s = 'luakit_acl({1})'\nmy_luakit_acl({'x'})\n", true},
		{"argument not a table", "luakit_acl(cmds)\n", "luakit_acl(cmds)\n", false},
		{"table over two lines", "luakit_acl({'get',\n KEYS[1]})\n", "luakit_acl({'get',\n KEYS[1]})\n", false},
		{"no arguments", "luakit_acl()\n", "luakit_acl()\n", false},
		{"unterminated", "luakit_acl({'get', KEYS[1]}\n", "luakit_acl({'get', KEYS[1]}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, inline := withACLPreamble(tt.src, "")
			want := tt.src // no call: unchanged
			if tt.want != "" {
				head, _, _ := strings.Cut(tt.src, "--\n")
				if head == tt.src {
					head = ""
				} else {
					head += "--\n"
				}
				want = head + ACLPreamble + tt.want
			}
			if got != want || inline != tt.inline {
				t.Fatalf("got %q, %v\nwant %q, %v", got, inline, want, tt.inline)
			}
			if WithACLPreamble(tt.src) != got {
				t.Fatal("WithACLPreamble differs from withACLPreamble")
			}
			if strings.Count(got, "\n") != strings.Count(tt.src, "\n")+strings.Count(ACLPreamble, "\n") && tt.want != "" {
				t.Fatal("the rewrite changed the number of lines")
			}
		})
	}
}

func TestPermission(t *testing.T) {
	for _, msg := range []string{
		"NOPERM User u has no permissions to run the 'pexpire' command",
		"NOPERM this user has no permissions to run the 'pexpire' command this script needs script: abc, on @user_script:5.",
		"The user executing the script can't run this command or subcommand script: abc, on @user_script:1.",
		"ACL failure in script: User u has no permissions to run the 'pexpire' command script: abc, on @user_script:1.",
	} {
		err := Permission(redisErr(t, msg))
		var pe *PermissionError
		if !errors.As(err, &pe) || !errors.Is(err, ErrNoPermission) || Classify(err) != ClassTerminal {
			t.Fatalf("%q: got %v", msg, err)
		}
		if strings.Contains(pe.Reason, "script:") || strings.HasPrefix(pe.Reason, "NOPERM") {
			t.Fatalf("%q: reason %q", msg, pe.Reason)
		}
	}
	other := redisErr(t, "WRONGTYPE Operation against a key holding the wrong kind of value")
	if Permission(other) != other {
		t.Fatal("WRONGTYPE became a permission error")
	}
	if Permission(nil) != nil {
		t.Fatal("nil")
	}
}

// TestInvalidConfigOf: the one builder's error carries the module prefix, matches ErrInvalidConfig and
// its kind (a sentinel, or a key error found with errors.As), and takes kind's message when format is "".
func TestInvalidConfigOf(t *testing.T) {
	s := ConfigSentinel("m: bad count")
	err := InvalidConfigOf("m", s, "count %d is negative", -1)
	if err.Error() != "m: count -1 is negative" || !errors.Is(err, s) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("InvalidConfigOf = %v", err)
	}
	cross := CheckSameSlot(NamedKey{Role: "a", Key: "x"}, NamedKey{Role: "b", Key: "y"})
	err = InvalidConfigOf("m", cross, "")
	var cse *CrossSlotError
	if err.Error() != "m: "+cross.Error() || !errors.As(err, &cse) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("InvalidConfigOf(cross-slot) = %v", err)
	}
	if errors.Is(InvalidConfig("m", "x"), s) {
		t.Fatal("InvalidConfig matches a kind it was not given")
	}
}
