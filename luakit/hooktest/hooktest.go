// Package hooktest provides a [luakit.Hook] that records what it sees, for tests of code that takes
// operation hooks (in the spirit of net/http/httptest).
package hooktest

import (
	"context"
	"errors"
	"sync"

	"github.com/coordkit/coordkit/luakit"
)

// ErrRejected is the error [Recorder.Admit] returns for an operation it rejects. A primitive returns
// it to its caller unchanged.
var ErrRejected = errors.New("hooktest: rejected by the hook")

// Recorder is a [luakit.Hook] that journals every admission ("admit NAME @INSTANCE") and completion
// ("done NAME OUTCOME") in order, and rejects with [ErrRejected] the operations named by
// [Recorder.Reject] (or every operation after [Recorder.RejectAll]). A rejected admission is
// journalled too and gets no completion. The zero value admits everything and is ready to use. It is
// safe for concurrent use; it never blocks beyond its own mutex.
type Recorder struct {
	mu     sync.Mutex
	all    bool
	reject map[string]bool
	log    []string
}

// Admit implements [luakit.Hook]. It returns ctx unchanged.
func (r *Recorder) Admit(ctx context.Context, op luakit.Operation) (context.Context, luakit.Completion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, "admit "+op.Name+" @"+op.Instance)
	if r.all || r.reject[op.Name] {
		return nil, nil, ErrRejected
	}
	return ctx, func(o luakit.HookOutcome, _ error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.log = append(r.log, "done "+op.Name+" "+o.String())
	}, nil
}

// Reject makes later admissions of the named operations (luakit.Operation.Name, for example
// "LOCK ACQUIRE") fail with [ErrRejected], replacing any earlier set; with no names it rejects
// nothing more by name. It does not change [Recorder.RejectAll].
func (r *Recorder) Reject(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reject = make(map[string]bool, len(names))
	for _, n := range names {
		r.reject[n] = true
	}
}

// RejectAll makes later admissions of every operation fail with [ErrRejected] while on is true.
func (r *Recorder) RejectAll(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = on
}

// Take returns the journal recorded since the last Take (nil when empty) and clears it.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	return out
}
