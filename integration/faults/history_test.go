package faults_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// outcome is what the client learned about one operation.
type outcome int8

const (
	// ok: the operation's reply was read; Flag, Val, Token and Str hold what it said.
	ok outcome = iota + 1
	// failed: an error that proves the operation did not take effect (a refusal, a dial error, an
	// error not matching luakit.ErrUncertain).
	failed
	// uncertain: an error matching luakit.ErrUncertain: the operation may or may not have taken
	// effect, now or later. Checkers treat it as possibly happened.
	uncertain
	// instant: not an operation but an observation or a step made under a workload's lock (a fenced
	// write, a leadership sample, a handler start), or a nemesis event.
	instant
)

func (o outcome) String() string {
	switch o {
	case ok:
		return "ok"
	case failed:
		return "fail"
	case uncertain:
		return "UNCERTAIN"
	case instant:
		return "-"
	}
	return "?"
}

// event is one entry of the recorded history. Seq orders the history: it is taken from one atomic
// counter when the event is recorded (for operations: when the reply or error was read; CallSeq was
// taken just before the call), and steps that checkers compare (fenced writes, leadership samples,
// handler starts and ends) take it while holding their workload's lock, so Seq order is the real order
// of those steps. Call and Ret are local monotonic offsets from the run's start, for reading only:
// no checker decides on them.
type event struct {
	Seq, CallSeq int64
	Call, Ret    time.Duration
	W            string // workload: lock, leader, idem, rate, counter, nemesis
	Worker       int
	Op           string
	Key          string
	Out          outcome
	Token        int64     // lock / leader fencing token; counter delta
	Val          int64     // counter value; lease id; ...
	Flag         bool      // acquired / accepted / allowed / leading
	Flag2        bool      // holding (fenced write) / within deadline (idempotency run)
	Str          string    // run id (idempotency), attempt state
	Res          string    // idempotency: the result a Completed attempt replayed
	ServerAt     time.Time // rate limit: the server time of the decision (Result.At)
	Err          string
}

func (e event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-6d %9.3fms %-7s w%-2d %-14s", e.Seq, float64(e.Ret)/1e6, e.W, e.Worker, e.Op)
	if e.Key != "" {
		fmt.Fprintf(&b, " key=%s", e.Key)
	}
	if e.Out != instant {
		fmt.Fprintf(&b, " %s (call #%d %.3fms)", e.Out, e.CallSeq, float64(e.Call)/1e6)
	}
	if e.Token != 0 {
		fmt.Fprintf(&b, " token=%d", e.Token)
	}
	if e.Val != 0 {
		fmt.Fprintf(&b, " val=%d", e.Val)
	}
	fmt.Fprintf(&b, " flag=%t", e.Flag)
	if e.Flag2 {
		b.WriteString(" flag2=true")
	}
	if e.Str != "" {
		fmt.Fprintf(&b, " str=%q", e.Str)
	}
	if e.Res != "" {
		fmt.Fprintf(&b, " replayed=%q", e.Res)
	}
	if !e.ServerAt.IsZero() {
		fmt.Fprintf(&b, " server_at=%d", e.ServerAt.UnixMilli())
	}
	if e.Err != "" {
		fmt.Fprintf(&b, " err=%q", e.Err)
	}
	return b.String()
}

// recorder collects one run's history; safe for concurrent use.
type recorder struct {
	start time.Time
	seq   atomic.Int64
	mu    sync.Mutex
	evs   []event
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

// now returns the next sequence number and the local offset, for an operation's call.
func (r *recorder) now() (int64, time.Duration) { return r.seq.Add(1), time.Since(r.start) }

// add records e with the next sequence number (and Ret = now); for an instant Call = Ret.
func (r *recorder) add(e event) event {
	e.Seq, e.Ret = r.now()
	if e.Out == instant || e.Out == 0 {
		e.Out, e.Call, e.CallSeq = instant, e.Ret, e.Seq
	}
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
	return e
}

// history returns the events in Seq order.
func (r *recorder) history() []event {
	r.mu.Lock()
	h := append([]event(nil), r.evs...)
	r.mu.Unlock()
	sort.Slice(h, func(i, j int) bool { return h[i].Seq < h[j].Seq })
	return h
}

// violation is one broken safety property, with the events that show it.
type violation struct {
	Checker string
	Msg     string
	Seqs    []int64 // the events that prove it
}

// excerpt prints the history around v: for each of v.Seqs (marked '>') the 8 events before and after
// it among the events of v's workload and of the nemesis (lock attempts that found the lock held are
// left out), windows merged, gaps shown as "...".
func excerpt(h []event, workload string, v violation) string {
	mark := map[int64]bool{}
	for _, s := range v.Seqs {
		mark[s] = true
	}
	var sel []event
	for _, e := range h {
		noise := e.W == "lock" && e.Op == "acquire" && e.Out == ok && !e.Flag
		if mark[e.Seq] || (e.W == workload || e.W == "nemesis") && !noise {
			sel = append(sel, e)
		}
	}
	show := make([]bool, len(sel))
	for i, e := range sel {
		if mark[e.Seq] {
			for k := max(0, i-8); k < min(len(sel), i+9); k++ {
				show[k] = true
			}
		}
	}
	var b strings.Builder
	gap := false
	for i, e := range sel {
		if !show[i] {
			gap = true
			continue
		}
		if gap && b.Len() > 0 {
			b.WriteString("    ...\n")
		}
		gap = false
		m := " "
		if mark[e.Seq] {
			m = ">"
		}
		fmt.Fprintf(&b, "  %s %s\n", m, e)
	}
	if b.Len() == 0 {
		return "  (no events)\n"
	}
	return b.String()
}

// tally counts the operations of one workload by outcome.
type tally struct{ ok, failed, uncertain, instants int }

func count(h []event, workload string) tally {
	var t tally
	for _, e := range h {
		if e.W != workload {
			continue
		}
		switch e.Out {
		case ok:
			t.ok++
		case failed:
			t.failed++
		case uncertain:
			t.uncertain++
		case instant:
			t.instants++
		}
	}
	return t
}
