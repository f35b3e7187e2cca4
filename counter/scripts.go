package counter

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed *.lua
var scriptFS embed.FS

var (
	incrScript  = luakit.MustLoad(scriptFS, "incr")
	limitScript = luakit.MustLoad(scriptFS, "limit")
	floorScript = luakit.MustLoad(scriptFS, "floor")
)
