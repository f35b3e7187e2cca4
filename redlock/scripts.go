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
	// inspectScript runs read-only (EVALSHA_RO, EVAL_RO after a script flush): the server itself
	// refuses a write from it.
	inspectScript = luakit.NewReadOnlyScript("inspect", luakit.MustLoad(scriptFS, "inspect").Source())
)
