// Package fence holds an in-memory fenced record for Coordkit's tests and demo: the check a protected
// resource makes with each write, so that scenarios can show what a fencing token protects.
package fence

import "sync"

// Fence is an in-memory fenced record: the check a protected resource must make atomically with each
// write. It accepts a write when its token is positive and not lower than the highest token accepted so
// far (equal tokens allow repeated writes during one lease), and rejects it otherwise.
//
// Fence is for tests and the demo (it moved here from the released lock module). Real enforcement
// belongs in the resource's own durable transaction, shared by every writer (for example a
// conditional UPDATE ... WHERE last_token <= $token).
// The zero value is an empty record ready to use; a Fence is safe for concurrent use and must not be
// copied after first use.
type Fence[T any] struct {
	mu       sync.Mutex
	last     int64
	value    T
	accepted int64
	rejected int64
}

// TryWrite stores value if token is positive and at least the highest accepted token, and reports
// whether it did. It never blocks on I/O.
func (f *Fence[T]) TryWrite(token int64, value T) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token <= 0 || token < f.last {
		f.rejected++
		return false
	}
	f.last = token
	f.value = value
	f.accepted++
	return true
}

// Value returns the current value and the highest accepted token (0 and the zero T before any write).
func (f *Fence[T]) Value() (T, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.value, f.last
}

// Counts returns how many writes were accepted and rejected so far.
func (f *Fence[T]) Counts() (accepted, rejected int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, f.rejected
}
