package idempotency

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	beginScript    = luakit.MustLoad(scriptFS, "begin")
	extendScript   = luakit.MustLoad(scriptFS, "extend")
	completeScript = luakit.MustLoad(scriptFS, "complete")
	abandonScript  = luakit.MustLoad(scriptFS, "abandon")
	inspectScript  = luakit.MustLoad(scriptFS, "inspect")
)
