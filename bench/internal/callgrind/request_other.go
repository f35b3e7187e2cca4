//go:build !amd64

package callgrind

// request does nothing: client requests are written for amd64 only.
func request(*[6]uint64) uint64 { return 0 }

// supported reports whether this architecture has client requests here.
const supported = false
