package faults_test

import (
	"reflect"
	"testing"
	"time"
)

// hist numbers events in order (Seq 1, 2, ...); an operation's CallSeq is its own Seq unless set.
func hist(evs ...event) []event {
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		if evs[i].CallSeq == 0 || evs[i].CallSeq > evs[i].Seq {
			evs[i].CallSeq = evs[i].Seq
		}
		if evs[i].Out == 0 {
			evs[i].Out = instant
		}
	}
	return evs
}

// TestCheckers feeds each checker a small history that breaks its property and one that keeps it:
// the checkers themselves must be able to fail (the suite's real runs are expected to pass).
func TestCheckers(t *testing.T) {
	acq := func(w int, tok int64) event {
		return event{W: "lock", Worker: w, Op: "acquire", Out: ok, Flag: true, Token: tok, Val: tok}
	}
	wr := func(w int, tok int64, accepted, holding bool) event {
		return event{W: "lock", Worker: w, Op: "write", Token: tok, Val: tok, Flag: accepted, Flag2: holding}
	}
	obs := func(w int, tok int64) event {
		return event{W: "leader", Worker: w, Op: "sample", Token: tok, Flag: true}
	}
	run := func(op, key, id string) event { return event{W: "idem", Op: op, Key: key, Str: id, Flag2: true} }
	begin := func(key, state, res string) event {
		return event{W: "idem", Op: "begin", Key: key, Out: ok, Str: state, Res: res}
	}
	complete := func(key, id string, out outcome) event {
		return event{W: "idem", Op: "complete", Key: key, Str: id, Out: out, Flag: out == ok}
	}
	allow := func(ms int64) event {
		return event{W: "rate", Op: "allow", Out: ok, Flag: true, ServerAt: time.UnixMilli(1_000_000 + ms)}
	}
	cnt := func(w int, op string, delta int64, out outcome, allowed bool, val int64) event {
		return event{W: "counter", Worker: w, Op: op, Key: "k", Token: delta, Out: out, Flag: allowed, Val: val}
	}
	countOf := func(h []event) []violation { vs, _ := checkCounter(h, 10, 0, time.Second); return vs }
	tests := []struct {
		name  string
		check func([]event) []violation
		good  []event
		bad   []event
	}{
		{"lock/stale write", checkLock,
			hist(acq(0, 1), wr(0, 1, true, true), acq(1, 2), wr(1, 2, true, true), wr(0, 1, false, false)),
			hist(acq(0, 1), wr(0, 1, true, true), acq(1, 2), wr(1, 2, true, true), wr(0, 1, true, false))},
		{"lock/token order", checkLock,
			hist(acq(0, 1), acq(1, 2)),
			hist(acq(0, 2), acq(1, 1))},
		{"lock/two holders", checkLock,
			hist(acq(0, 1), wr(0, 1, true, true), wr(0, 1, true, true), acq(1, 2), wr(1, 2, true, true)),
			hist(acq(0, 1), wr(0, 1, true, true), acq(1, 2), wr(1, 2, true, true), wr(0, 1, false, true))},
		{"leader/overlap", checkLeader,
			hist(obs(0, 1), obs(0, 1), obs(1, 2), obs(1, 2)),
			hist(obs(0, 1), obs(1, 2), obs(0, 1))},
		{"leader/one term twice", checkLeader,
			hist(obs(0, 1), obs(1, 2)),
			hist(obs(0, 1), obs(1, 1))},
		{"idempotency/concurrent runs", func(h []event) []violation { return checkIdem(h, true) },
			hist(run("run-start", "a", "r1"), run("run-end", "a", "r1"), run("run-start", "a", "r2"), run("run-end", "a", "r2")),
			hist(run("run-start", "a", "r1"), run("run-start", "a", "r2"), run("run-end", "a", "r1"), run("run-end", "a", "r2"))},
		{"idempotency/replay", func(h []event) []violation { return checkIdem(h, true) },
			hist(complete("a", "r1", ok), begin("a", "completed", "r1"), complete("b", "r2", uncertain), begin("b", "completed", "r2")),
			hist(complete("a", "r1", ok), begin("a", "completed", "r9"))},
		{"idempotency/after completion", func(h []event) []violation { return checkIdem(h, true) },
			hist(begin("a", "started", ""), complete("a", "r1", ok), begin("a", "completed", "r1")),
			hist(complete("a", "r1", ok), begin("a", "started", ""))},
		{"ratelimit/window", func(h []event) []violation { return checkRate(h, 2, 100*time.Millisecond) },
			hist(allow(0), allow(50), allow(100), allow(150), allow(200)),
			hist(allow(0), allow(50), allow(99))},
		{"counter/limit", countOf,
			hist(cnt(0, "incr", 3, ok, true, 3), cnt(0, "incr", 3, ok, true, 6)),
			hist(cnt(0, "incr", 3, ok, true, 11))},
		{"counter/linearizability", countOf,
			hist(cnt(0, "incr", 3, uncertain, false, 0), cnt(1, "incr", 2, ok, true, 5), cnt(1, "get", 0, ok, false, 5)),
			hist(cnt(0, "incr", 3, ok, true, 3), cnt(1, "incr", 2, ok, true, 2))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if vs := tt.check(tt.good); len(vs) > 0 {
				t.Errorf("a history that keeps the property: %v", vs)
			}
			if vs := tt.check(tt.bad); len(vs) == 0 {
				t.Errorf("a history that breaks the property passed")
			} else {
				t.Logf("%s: %s", vs[0].Checker, vs[0].Msg)
			}
		})
	}
}

// TestSchedule: the fault schedule is a function of the seed (a replay injects the same faults), fills
// the span and uses every kind within the documented ranges.
func TestSchedule(t *testing.T) {
	a, b := schedule(42, 30*time.Second, 3, numClients), schedule(42, 30*time.Second, 3, numClients)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two schedules of one seed differ")
	}
	if reflect.DeepEqual(a, schedule(43, 30*time.Second, 3, numClients)) {
		t.Fatal("two seeds gave one schedule")
	}
	kinds := map[faultKind]int{}
	var total time.Duration
	for _, f := range a {
		kinds[f.Kind]++
		total += f.Gap + f.Dur
		if f.Gap < 100*time.Millisecond || f.Gap > 500*time.Millisecond {
			t.Errorf("%v: gap %v", f, f.Gap)
		}
		switch f.Kind {
		case faultPause:
			if f.Dur < 100*time.Millisecond || f.Dur > time.Second || f.Target < 0 || f.Target >= 3 {
				t.Errorf("%v out of range", f)
			}
		case faultLatency:
			if f.Delay < 50*time.Millisecond || f.Delay > 400*time.Millisecond {
				t.Errorf("%v out of range", f)
			}
		}
	}
	if len(kinds) != len(faultKinds) || total < 30*time.Second {
		t.Errorf("kinds %v, total %v", kinds, total)
	}
}
