package ratelimit

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

// engineFS holds the engine's scripts. Other parts of the package embed their own files.
//
//go:embed engine_components.lua engine_gcra.lua
var engineFS embed.FS

var (
	// componentsScript decides and migrates fixed windows, sliding windows, token buckets and
	// composites (one hash per key).
	componentsScript = luakit.MustLoad(engineFS, "engine_components")
	// gcraScript decides and migrates GCRA limits (one TAT string per key).
	gcraScript = luakit.MustLoad(engineFS, "engine_gcra")
)
