package luakit

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPreludeFunctions: the prelude parses into the functions its documentation names, each ending at
// its own "end".
func TestPreludeFunctions(t *testing.T) {
	t.Parallel()
	var names []string
	for _, f := range preludeFuncs {
		names = append(names, f.name)
		assert.True(t, strings.HasSuffix(f.text, "\nend\n"), "%s does not end with end", f.name)
		assert.Contains(t, f.text, "local function "+f.name+"(")
	}
	assert.Equal(t, []string{"luakit_now_ms", "luakit_now_us", "luakit_int64", "luakit_int64_split",
		"luakit_type", "luakit_owner", "luakit_del_owned", "luakit_fence_read", "luakit_minus_one", "luakit_fence_next"}, names)
}

// TestWithPreludeSelects: a script gets the prelude functions it calls and the ones they call, in the
// prelude's order, after its header; a script that calls none is unchanged; names in comments and
// strings do not count.
func TestWithPreludeSelects(t *testing.T) {
	t.Parallel()
	src := "-- head: calls luakit_now_us in a comment\n--\nreturn luakit_del_owned(KEYS[1], ARGV[1])\n"
	got := WithPrelude(src)
	require.True(t, strings.HasPrefix(got, "-- head: calls luakit_now_us in a comment\n--\n"))
	require.True(t, strings.HasSuffix(got, "return luakit_del_owned(KEYS[1], ARGV[1])\n"))
	owner := strings.Index(got, "local function luakit_owner(")
	del := strings.Index(got, "local function luakit_del_owned(")
	assert.True(t, owner > 0 && del > owner, "luakit_owner must come before the function calling it")
	assert.NotContains(t, got, "local function luakit_now_us(")
	assert.NotContains(t, got, "local function luakit_fence_next(")

	plain := "return 'luakit_now_ms()'\n"
	assert.Equal(t, plain, WithPrelude(plain))

	fence := WithPrelude("return luakit_fence_next(KEYS[1])\n")
	for _, f := range []string{"luakit_fence_next", "luakit_minus_one"} {
		assert.Contains(t, fence, "local function "+f+"(")
	}
	assert.NotContains(t, fence, "local function luakit_fence_read(")
	assert.NotContains(t, fence, "local function luakit_type(")

	read := WithPrelude("return luakit_fence_read(KEYS[1])\n")
	typ := strings.Index(read, "local function luakit_type(")
	assert.True(t, typ > 0 && typ < strings.Index(read, "local function luakit_fence_read("),
		"luakit_fence_read gets luakit_type, defined before it")
}

// TestMustLoadModulePrelude: MustLoad adds the functions a script calls from its module's prelude.lua
// (and the luakit prelude functions those call), after the ACL preamble; a prelude function without
// its "end" panics.
func TestMustLoadModulePrelude(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"prelude.lua": {Data: []byte("-- m_now: now.\nlocal function m_now()\n  return luakit_now_ms()\nend\n\nlocal function m_unused()\n  return 1\nend\n")},
		"op.lua":      {Data: []byte("-- op: test.\nluakit_acl({'get', KEYS[1]})\nreturn m_now()\n")},
	}
	src := MustLoad(fsys, "op").Source()
	acl := strings.Index(src, "local function luakit_acl(")
	now := strings.Index(src, "local function luakit_now_ms(")
	mnow := strings.Index(src, "local function m_now(")
	assert.True(t, acl > 0 && now > acl && mnow > now, "order: ACL preamble, luakit prelude, module prelude")
	assert.NotContains(t, src, "m_unused")
	assert.True(t, strings.HasPrefix(src, "-- op: test.\n"))

	bad := fstest.MapFS{
		"prelude.lua": {Data: []byte("local function m_bad()\n  return 1\n")},
		"op.lua":      {Data: []byte("return 1\n")},
	}
	assert.Panics(t, func() { MustLoad(bad, "op") })
}
