package lock

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	acquireScript = luakit.MustLoad(scriptFS, "acquire")
	extendScript  = luakit.MustLoad(scriptFS, "extend")
	verifyScript  = luakit.MustLoad(scriptFS, "verify")
	releaseScript = luakit.MustLoad(scriptFS, "release")
)

// The fair lock's scripts (see prelude.lua for its keys).
var (
	fairAcquireScript = luakit.MustLoad(scriptFS, "fair_acquire")
	fairReleaseScript = luakit.MustLoad(scriptFS, "fair_release")
	fairRefreshScript = luakit.MustLoad(scriptFS, "fair_refresh")
	fairCancelScript  = luakit.MustLoad(scriptFS, "fair_cancel")
)
