package faults_test

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Checkers: pure functions of a recorded history. Each returns the violations it finds; none looks
// at durations or local clocks, only at the order of events (Seq, CallSeq), the values the servers
// returned and, for the rate limiter, the server's decision times.

func filter(h []event, workload string, ops ...string) []event {
	var out []event
	for _, e := range h {
		if e.W != workload {
			continue
		}
		if len(ops) == 0 {
			out = append(out, e)
			continue
		}
		for _, op := range ops {
			if e.Op == op {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// span is the Seq range in which one holder (lease, term, handler run) was observed.
type span struct {
	id         string
	owner      int
	token      int64
	first, end int64 // Seq of the first and last observation
}

// disjointSpans reports every pair of spans of different holders that interleave (one observed
// between two observations of the other) and every pair of consecutive spans whose tokens do not
// strictly increase (when tokens is true).
func disjointSpans(checker string, spans []span, tokens bool, what string) []violation {
	sort.Slice(spans, func(i, j int) bool { return spans[i].first < spans[j].first })
	var vs []violation
	reach := 0 // the earlier span that ends last
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[reach], spans[i]
		if cur.first < prev.end {
			vs = append(vs, violation{checker, fmt.Sprintf("%s overlap: %s (w%d, token %d) observed holding at #%d..#%d, %s (w%d, token %d) at #%d..#%d",
				what, prev.id, prev.owner, prev.token, prev.first, prev.end, cur.id, cur.owner, cur.token, cur.first, cur.end),
				[]int64{prev.first, prev.end, cur.first}})
		} else if p := spans[i-1]; tokens && cur.token <= p.token {
			vs = append(vs, violation{checker, fmt.Sprintf("fencing tokens not increasing: %s held with token %d (#%d..#%d), then %s with token %d (#%d..#%d)",
				p.id, p.token, p.first, p.end, cur.id, cur.token, cur.first, cur.end), []int64{p.end, cur.first}})
		}
		if cur.end > prev.end {
			reach = i
		}
	}
	return vs
}

// checkLock: the lock workload's history against a fenced store.
//   - no stale write accepted: in the store's order (Seq), an accepted write never carries a token
//     lower than one accepted before it;
//   - tokens strictly increase: acquisitions that returned a lease have distinct tokens, and one that
//     returned before another was called has the lower token;
//   - mutual exclusion: the Seq spans in which distinct leases were observed holding (Remaining() > 0,
//     read under the store's lock) never interleave, and their tokens increase in that order.
func checkLock(h []event) []violation {
	var vs []violation
	var highest int64
	var highestSeq int64
	writes := filter(h, "lock", "write")
	for _, e := range writes {
		if !e.Flag {
			continue
		}
		if e.Token < highest {
			vs = append(vs, violation{"lock", fmt.Sprintf("stale write accepted: token %d after token %d", e.Token, highest), []int64{highestSeq, e.Seq}})
		}
		if e.Token >= highest {
			highest, highestSeq = e.Token, e.Seq
		}
	}
	acq := filter(h, "lock", "acquire")
	var got []event
	seen := map[int64]event{}
	for _, e := range acq {
		if e.Out != ok || !e.Flag {
			continue
		}
		if p, dup := seen[e.Token]; dup {
			vs = append(vs, violation{"lock", fmt.Sprintf("token %d issued twice (leases %d and %d)", e.Token, p.Val, e.Val), []int64{p.Seq, e.Seq}})
		}
		seen[e.Token] = e
		got = append(got, e)
	}
	// got is in return (Seq) order; prefix maxima of the tokens.
	pmax := make([]int, len(got))
	for i := range got {
		pmax[i] = i
		if i > 0 && got[pmax[i-1]].Token > got[i].Token {
			pmax[i] = pmax[i-1]
		}
	}
	for _, b := range got {
		n := sort.Search(len(got), func(i int) bool { return got[i].Seq >= b.CallSeq }) // got[:n] returned before b was called
		if n > 0 {
			a := got[pmax[n-1]]
			if a.Token >= b.Token {
				vs = append(vs, violation{"lock", fmt.Sprintf("token not increasing: lease %d got token %d (returned #%d) before lease %d was called (#%d) and got token %d",
					a.Val, a.Token, a.Seq, b.Val, b.CallSeq, b.Token), []int64{a.Seq, b.Seq}})
			}
		}
	}
	byLease := map[int64]*span{}
	for _, e := range writes {
		if !e.Flag2 {
			continue
		}
		s := byLease[e.Val]
		if s == nil {
			s = &span{id: fmt.Sprintf("lease %d", e.Val), owner: e.Worker, token: e.Token, first: e.Seq}
			byLease[e.Val] = s
		}
		s.end = e.Seq
	}
	var spans []span
	for _, s := range byLease {
		spans = append(spans, *s)
	}
	return append(vs, disjointSpans("lock", spans, true, "holder")...)
}

// checkLeader: the leadership samples (Election.Current of every candidate, and each elected
// callback's own Term.Err check, all taken under one lock in Seq order).
//   - one leader per term: a fencing token is never observed leading on two candidates;
//   - no overlapping terms: the Seq spans in which distinct terms were observed leading never
//     interleave, and their tokens increase in that order.
func checkLeader(h []event) []violation {
	var vs []violation
	terms := map[[2]int64]*span{}
	owner := map[int64]event{}
	for _, e := range filter(h, "leader", "sample", "observe") {
		if !e.Flag {
			continue
		}
		if p, dup := owner[e.Token]; dup && p.Worker != e.Worker {
			vs = append(vs, violation{"leader", fmt.Sprintf("two leaders for term %d: candidates %d and %d", e.Token, p.Worker, e.Worker), []int64{p.Seq, e.Seq}})
		} else if !dup {
			owner[e.Token] = e
		}
		k := [2]int64{int64(e.Worker), e.Token}
		s := terms[k]
		if s == nil {
			s = &span{id: fmt.Sprintf("term %d", e.Token), owner: e.Worker, token: e.Token, first: e.Seq}
			terms[k] = s
		}
		s.end = e.Seq
	}
	if len(vs) > 0 {
		return vs
	}
	var spans []span
	for _, s := range terms {
		spans = append(spans, *s)
	}
	return append(vs, disjointSpans("leader", spans, true, "term")...)
}

// checkIdem: idempotency executions per key.
//   - never twice concurrently: two handler runs of one key, each started and ended within its
//     claim (checked under the run registry's lock against the claim's send time + lease), never
//     interleave in Seq order;
//   - replayed exactly: every Completed attempt returns the bytes some Complete of that key sent
//     (certain or uncertain) before the attempt returned, and never an older result once a newer
//     Complete of the key is known to have succeeded before the attempt began;
//   - completed once (when retained, i.e. results outlive the run): at most one Complete per key
//     returns true, and no claim of a key is Started after a Complete of it returned true.
func checkIdem(h []event, retained bool) []violation {
	var vs []violation
	type run struct{ start, end event }
	runs := map[string]*run{}
	var order []string
	for _, e := range filter(h, "idem", "run-start", "run-end") {
		r := runs[e.Str]
		if r == nil {
			r = &run{}
			runs[e.Str] = r
			order = append(order, e.Str)
		}
		if e.Op == "run-start" {
			r.start = e
		} else {
			r.end = e
		}
	}
	perKey := map[string][]span{}
	for _, id := range order {
		r := runs[id]
		if r.start.Seq == 0 || r.end.Seq == 0 || !r.start.Flag2 || !r.end.Flag2 {
			continue
		}
		perKey[r.start.Key] = append(perKey[r.start.Key], span{id: "run " + id + " of " + r.start.Key, owner: r.start.Worker, first: r.start.Seq, end: r.end.Seq})
	}
	keys := make([]string, 0, len(perKey))
	for k := range perKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vs = append(vs, disjointSpans("idempotency", perKey[k], false, "handler run")...)
	}
	completes := map[string][]event{} // per key, certain and uncertain completions in Seq order
	done := map[string]event{}        // the first certain completion per key
	for _, e := range filter(h, "idem", "complete") {
		if e.Out == failed || (e.Out == ok && !e.Flag) {
			continue
		}
		completes[e.Key] = append(completes[e.Key], e)
		if e.Out != ok {
			continue
		}
		if p, dup := done[e.Key]; dup && retained {
			vs = append(vs, violation{"idempotency", fmt.Sprintf("key %s completed twice: %q and %q", e.Key, p.Str, e.Str), []int64{p.Seq, e.Seq}})
		} else if !dup {
			done[e.Key] = e
		}
	}
	for _, e := range filter(h, "idem", "begin") {
		if e.Out != ok {
			continue
		}
		switch e.Str {
		case "started":
			if c, completed := done[e.Key]; retained && completed && e.CallSeq > c.Seq {
				vs = append(vs, violation{"idempotency", fmt.Sprintf("key %s started again after its completion", e.Key), []int64{c.Seq, e.Seq}})
			}
		case "completed":
			var src *event
			for i, c := range completes[e.Key] {
				if c.Str == e.Res && c.CallSeq < e.Seq {
					src = &completes[e.Key][i]
				}
			}
			if src == nil {
				vs = append(vs, violation{"idempotency", fmt.Sprintf("key %s replayed %q, which no Complete of it sent before", e.Key, e.Res), []int64{e.Seq}})
				continue
			}
			for _, c := range completes[e.Key] {
				if c.Out == ok && c.Str != e.Res && c.CallSeq > src.Seq && c.Seq < e.CallSeq {
					vs = append(vs, violation{"idempotency", fmt.Sprintf("key %s replayed %q after a newer completion %q had succeeded", e.Key, e.Res, c.Str), []int64{src.Seq, c.Seq, e.Seq}})
					break
				}
			}
		}
	}
	return vs
}

// checkRate: admissions of a sliding-window limiter replayed against server time: among the
// admissions known to have happened (Allow returned Allowed), no two that lie less than window apart
// in server time (Result.At, whole milliseconds) belong to a set larger than limit. Uncertain
// attempts may have consumed permits too, which only lowers what the known ones may use: they are
// not counted, so they can never make the check fail.
func checkRate(h []event, limit int64, window time.Duration) []violation {
	var adm []event
	for _, e := range filter(h, "rate", "allow") {
		if e.Out == ok && e.Flag {
			adm = append(adm, e)
		}
	}
	sort.SliceStable(adm, func(i, j int) bool { return adm[i].ServerAt.Before(adm[j].ServerAt) })
	w := window.Milliseconds()
	var vs []violation
	i := 0
	reported := -1
	for j := range adm {
		for adm[j].ServerAt.UnixMilli()-adm[i].ServerAt.UnixMilli() >= w {
			i++
		}
		if int64(j-i+1) > limit && i > reported {
			var seqs []int64
			for k := i; k <= j; k++ {
				seqs = append(seqs, adm[k].Seq)
			}
			vs = append(vs, violation{"ratelimit", fmt.Sprintf("%d admissions within %dms of server time (%d..%d), policy allows %d",
				j-i+1, w, adm[i].ServerAt.UnixMilli(), adm[j].ServerAt.UnixMilli(), limit), seqs})
			reported = j
		}
	}
	return vs
}

// Counter model for porcupine: one int64 per key (absent = 0).
type counterIn struct {
	op           string // incr, decr, get
	delta, bound int64  // bound: the limit (incr) or the floor (decr)
}

type counterOut struct {
	unknown bool // uncertain: any reply, and the operation may or may not have happened
	allowed bool
	value   int64
}

// doubleCount breaks the model on purpose (each allowed change counted twice); only for showing that
// the linearizability check fails. Never true in a commit.
const doubleCount = false

func counterStep(state, input, output any) (bool, any) {
	s, in, out := state.(int64), input.(counterIn), output.(counterOut)
	ns, allowed := s, false
	d := in.delta
	if doubleCount {
		d *= 2
	}
	switch in.op {
	case "incr":
		if s+in.delta <= in.bound {
			ns, allowed = s+d, true
		}
	case "decr":
		if s-in.delta >= in.bound {
			ns, allowed = s-d, true
		}
	case "get":
		return out.unknown || out.value == s, s
	}
	if out.unknown {
		return true, ns
	}
	return out.allowed == allowed && out.value == ns, ns
}

var counterModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: counterStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(counterIn), output.(counterOut)
		if out.unknown {
			return fmt.Sprintf("%s(%d) -> ?", in.op, in.delta)
		}
		return fmt.Sprintf("%s(%d) -> %t %d", in.op, in.delta, out.allowed, out.value)
	},
}

// linResult is porcupine's verdict for one counter key.
type linResult struct {
	key    string
	ops    int
	result porcupine.CheckResult
	took   time.Duration
}

// checkCounter: the limit-checked counter workload.
//   - never above the limit, never below the floor: every value a call returned;
//   - linearizable: each key's history (uncertain calls open until the end of time, with any reply)
//     against the sequential counter, bounded by budget per key; a timeout is reported as Unknown,
//     never as a failure.
func checkCounter(h []event, limit, floor int64, budget time.Duration) ([]violation, []linResult) {
	var vs []violation
	byKey := map[string][]event{}
	var keys []string
	for _, e := range filter(h, "counter", "incr", "decr", "get") {
		if e.Out == ok && (e.Val > limit || e.Val < floor) {
			vs = append(vs, violation{"counter", fmt.Sprintf("key %s at %d, outside [%d, %d]", e.Key, e.Val, floor, limit), []int64{e.Seq}})
		}
		if e.Out == failed {
			continue
		}
		if byKey[e.Key] == nil {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	sort.Strings(keys)
	var res []linResult
	for _, k := range keys {
		evs := byKey[k]
		ops := make([]porcupine.Operation, len(evs))
		for i, e := range evs {
			in := counterIn{op: e.Op, delta: e.Token, bound: limit}
			if e.Op == "decr" {
				in.bound = floor
			}
			out := counterOut{unknown: e.Out == uncertain, allowed: e.Flag, value: e.Val}
			ret := e.Seq
			if out.unknown {
				ret = math.MaxInt64
			}
			ops[i] = porcupine.Operation{ClientId: e.Worker, Input: in, Call: e.CallSeq, Output: out, Return: ret}
		}
		start := time.Now()
		r, info := porcupine.CheckOperationsVerbose(counterModel, ops, budget)
		res = append(res, linResult{key: k, ops: len(ops), result: r, took: time.Since(start)})
		if r != porcupine.Illegal {
			continue
		}
		// The first operation (by call) missing from the longest partial linearization is where
		// every linearization got stuck.
		in := map[int]bool{}
		var longest []int
		for _, part := range info.PartialLinearizations() {
			for _, lin := range part {
				if len(lin) > len(longest) {
					longest = lin
				}
			}
		}
		for _, i := range longest {
			in[i] = true
		}
		stuck := -1
		for i := range ops {
			if !in[i] && (stuck < 0 || ops[i].Call < ops[stuck].Call) {
				stuck = i
			}
		}
		seqs := []int64{}
		if stuck >= 0 {
			seqs = append(seqs, evs[stuck].Seq)
		}
		if len(longest) > 0 {
			seqs = append(seqs, evs[longest[len(longest)-1]].Seq)
		}
		vs = append(vs, violation{"counter", fmt.Sprintf("key %s: history of %d operations is not linearizable (longest partial linearization: %d operations)", k, len(ops), len(longest)), seqs})
	}
	return vs, res
}
