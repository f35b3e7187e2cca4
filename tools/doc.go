// Package tools pins the developer tools Coordkit's Makefile runs (staticcheck) through the go.mod
// tool directive. Run them with `go tool -modfile=tools/go.mod <name>` from the repository root.
//
// This module is not released.
package tools
