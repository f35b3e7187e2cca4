package latch

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	createScript    = luakit.MustLoad(scriptFS, "create")
	countDownScript = luakit.MustLoad(scriptFS, "countdown")
	stateScript     = luakit.MustLoad(scriptFS, "state")
	abortScript     = luakit.MustLoad(scriptFS, "abort")
	deleteScript    = luakit.MustLoad(scriptFS, "delete")
)
