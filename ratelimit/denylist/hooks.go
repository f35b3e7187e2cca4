package denylist

import "github.com/coordkit/coordkit/luakit"

// The operation names of the package's hooks ([WithHooks]); docs/hooks.md in the repository lists
// them with the calls they cover.
const (
	opRead    = "RATE LIMIT DENY LIST READ"
	opWrite   = "RATE LIMIT DENY LIST WRITE"
	opInspect = "RATE LIMIT DENY LIST INSPECT"
)

// op is the hook operation name with the instance label inst.
func op(name, inst string) luakit.Operation {
	return luakit.Operation{Primitive: "ratelimit", Name: name, Instance: inst}
}
