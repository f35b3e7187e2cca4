package redlock

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	acquireScript = luakit.MustLoad(scriptFS, "acquire")
	fenceScript   = luakit.MustLoad(scriptFS, "fence")
	extendScript  = luakit.MustLoad(scriptFS, "extend")
	verifyScript  = luakit.MustLoad(scriptFS, "verify")
	releaseScript = luakit.MustLoad(scriptFS, "release")
)
