package denylist

import (
	"embed"

	"github.com/coordkit/coordkit/luakit"
)

//go:embed denylist*.lua
var scriptFS embed.FS

var (
	// readScript answers whether an identity is a member (SISMEMBER).
	readScript = luakit.MustLoad(scriptFS, "denylist_read")
	// writeScript adds or removes an identity (SADD / SREM).
	writeScript = luakit.MustLoad(scriptFS, "denylist_write")
	// inspectScript lists the set with the key's PTTL, read-only (EVALSHA_RO).
	inspectScript = luakit.NewReadOnlyScript("denylist_entries", mustSource("denylist_entries"))
)

// mustSource reads "<name>.lua" from scriptFS (package initialisation; panics when missing).
func mustSource(name string) string {
	b, err := scriptFS.ReadFile(name + ".lua")
	if err != nil {
		panic("ratelimit/denylist: load script " + name + ": " + err.Error())
	}
	return string(b)
}
