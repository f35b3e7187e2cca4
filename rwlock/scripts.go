package rwlock

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

// One script per transition; each declares its single key in KEYS.
var (
	acquireScript = luakit.MustLoad(scriptFS, "acquire")
	extendScript  = luakit.MustLoad(scriptFS, "extend")
	verifyScript  = luakit.MustLoad(scriptFS, "verify")
	releaseScript = luakit.MustLoad(scriptFS, "release")
)
