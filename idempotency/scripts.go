package idempotency

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	beginScript    = luakit.MustLoad(scriptFS, "begin")
	completeScript = luakit.MustLoad(scriptFS, "complete")
	abandonScript  = luakit.MustLoad(scriptFS, "abandon")
)
