package callgrind

// request makes the valgrind client request args[0] with arguments args[1:] and returns valgrind's
// result, or 0 when the process does not run under valgrind.
//
//go:noescape
func request(args *[6]uint64) uint64

// supported reports whether this architecture has client requests here.
const supported = true
