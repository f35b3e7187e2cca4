package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/bench/internal/callgrind"
	"github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/testkit"
)

// TestMain checks for leaked goroutines, with testkit's exceptions for rueidis' detached cluster
// goroutines (TestClusterSmoke makes a cluster client). The instruction phase's child (the test
// binary run again under callgrind) runs instead of the tests, and so does the fair section's
// killed-waiter child (the section re-executes its own binary, here the test binary).
func TestMain(m *testing.M) {
	if code, ok := childMain(); ok {
		os.Exit(code)
	}
	if spec, ok := fairWaiterSpec(os.Args[1:]); ok {
		os.Exit(runFairWaiter(spec, os.Stderr))
	}
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}

func parse(args ...string) (config, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseFlags(fs, args)
}

func TestParseFlags(t *testing.T) {
	c, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if c.target != testkit.Redis8 || c.rounds != 5 || !slices.Equal(c.callers, []int{1, 8, 64}) ||
		!slices.Equal(c.sections, []string{sectionLock, sectionHandoff, sectionGCRA, sectionFair, sectionAck}) || c.has(sectionCluster) ||
		!c.instructions || c.instrOps != 400 || c.instrReps != 3 || c.fairWaiters != 64 {
		t.Errorf("defaults: %+v", c)
	}
	c, err = parse("-instructions=false", "-instr-ops=50", "-instr-reps=1")
	if err != nil {
		t.Fatal(err)
	}
	if c.instructions || c.instrOps != 50 || c.instrReps != 1 {
		t.Errorf("instruction flags: %+v", c)
	}
	c, err = parse("-target=valkey9", "-rounds=5", "-duration=2s", "-callers=2, 16", "-only=gcra,fair,cluster", "-fair-waiters=3", "-json=x.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.target != testkit.Valkey9 || c.rounds != 5 || c.duration != 2*time.Second || !slices.Equal(c.callers, []int{2, 16}) ||
		!slices.Equal(c.sections, []string{sectionGCRA, sectionFair, sectionCluster}) || c.fairWaiters != 3 || c.jsonPath != "x.json" {
		t.Errorf("parsed: %+v", c)
	}
	for _, bad := range [][]string{
		{"-target=redis6"}, {"-callers=0"}, {"-callers=a"}, {"-callers="}, {"-only=locks"}, {"-only=,"},
		{"-rounds=0"}, {"-duration=0s"}, {"-handoffs=0"}, {"-fair-waiters=0"}, {"extra"}, {"-instr-ops=0"}, {"-instr-reps=0"},
		{fairWaiterArg + "127.0.0.1:1,n,200ms"}, // the child's argument is not a flag of a run
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// smokeTarget returns the target of the smoke runs: Redis 8, or Redis 7.0 when only that one is
// installed. A run that cannot start its server ends through testkit.FailOrSkip (skipped outside CI,
// failed in CI).
func smokeTarget() testkit.Target {
	if os.Getenv(testkit.EnvRedisURL) == "" {
		if _, err := testkit.Binary(testkit.Redis8); err != nil {
			if _, err := testkit.Binary(testkit.Redis70); err == nil {
				return testkit.Redis70
			}
		}
	}
	return testkit.Redis8
}

// runOrEnd runs cfg and ends t when it fails: through testkit.FailOrSkip when no server could be
// started, else as a failure with the runner's output.
func runOrEnd(t *testing.T, cfg config, out *bytes.Buffer) {
	t.Helper()
	if err := run(context.Background(), cfg, out); err != nil {
		if errors.Is(err, testkit.ErrUnavailable) {
			testkit.FailOrSkip(t, err)
		}
		t.Fatalf("%v\n%s", err, out.String())
	}
}

// TestRunSmoke runs every section except the cluster once (the opt-in conditional one included), as briefly as possible, and checks the
// JSON: every contender has its rows with operations counted and server commands seen. Timing is
// not checked.
func TestRunSmoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := config{target: smokeTarget(), rounds: 1, duration: 30 * time.Millisecond, warmup: 10 * time.Millisecond,
		callers: []int{1, 2}, sections: []string{sectionLock, sectionHandoff, sectionGCRA, sectionConditional}, handoffs: 2, allocOps: 20, jsonPath: path,
		instructions: true, instrOps: 20, instrReps: 2}
	var out bytes.Buffer
	runOrEnd(t, cfg, &out)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep peers.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Server.Version == "" || rep.Machine.NumCPU == 0 || rep.Date == "" {
		t.Errorf("header: %+v %+v %q", rep.Server, rep.Machine, rep.Date)
	}
	checkRows := func(section string, rows []peers.Throughput, names []string, perName int) {
		t.Helper()
		if len(rows) != len(names)*perName {
			t.Errorf("%s: %d rows, want %d", section, len(rows), len(names)*perName)
		}
		for _, r := range rows {
			if !slices.Contains(names, r.Contender) || r.OpsPerSec <= 0 || r.CommandsPerOp < 1 || len(r.Rounds) != 1 {
				t.Errorf("%s row %+v", section, r)
			}
			if r.Contender == names[len(names)-1] && r.VsCeiling != 1 { // the ceiling is the table's last row
				t.Errorf("%s: the ceiling's own ratio %v, want 1", section, r.VsCeiling)
			}
		}
	}
	checkRows("lock", rep.Lock, contenders.LockNames(), 2)
	checkRows("gcra", rep.GCRA, contenders.DeciderNames(), 4)
	condNames := contenders.Names(contenders.CoordkitConditional)
	if len(rep.Conditional) != 2*len(condNames) || len(rep.ConditionalAllocs) != len(condNames) {
		t.Errorf("conditional: %d rows, %d allocation rows", len(rep.Conditional), len(rep.ConditionalAllocs))
	}
	for _, r := range rep.Conditional {
		if !slices.Contains(condNames, r.Contender) || r.OpsPerSec <= 0 || r.CommandsPerOp < 5 ||
			(r.Contender == contenders.CoordkitScripts && r.VsCeiling != 1) {
			t.Errorf("conditional row %+v", r)
		}
	}
	if len(rep.LockAllocs) != len(contenders.Locks) || len(rep.GCRAAllocs) != len(contenders.Deciders) {
		t.Errorf("allocs: %+v %+v", rep.LockAllocs, rep.GCRAAllocs)
	}
	if len(rep.Handoff) != len(contenders.Handoffs) {
		t.Fatalf("hand-off rows: %+v", rep.Handoff)
	}
	for _, h := range rep.Handoff {
		if h.Count+h.Stalls != 2 || (h.Count > 0 && (h.P50Ms <= 0 || h.P99Ms < h.P50Ms)) || h.CommandsPerHandoff < 1 {
			t.Errorf("hand-off row %+v", h)
		}
	}
	checkInstructions(t, &out, "lock", rep.LockInstructions, contenders.LockNames(), 2)
	checkInstructions(t, &out, "gcra", rep.GCRAInstructions, contenders.DeciderNames(), 2)
	for _, want := range []string{"Lock cycles", "Contended hand-off", "GCRA decisions", "vs rueidislock", "vs redis_rate"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// checkInstructions checks the instruction rows of a run (the real callgrind run of the smoke
// test): one per contender with reps figures, the total above zero and, when this test binary has
// a symbol table (go test -ldflags=-s=false), the code figure above zero and below the total; and
// the server figures of the 1-caller row beside them. Without valgrind there are none, and the
// output says so.
func checkInstructions(t *testing.T, out *bytes.Buffer, section string, rows []peers.Instructions, names []string, reps int) {
	t.Helper()
	if _, err := callgrind.Valgrind(); err != nil || !callgrind.Supported {
		if len(rows) != 0 || (err != nil && !strings.Contains(out.String(), "instructions: not measured")) {
			t.Errorf("%s: without valgrind: rows %+v, output:\n%s", section, rows, out)
		}
		t.Logf("%s: no instruction phase: valgrind %v, supported %v", section, err, callgrind.Supported)
		return
	}
	if len(rows) != len(names) {
		t.Fatalf("%s: instruction rows %+v\n%s", section, rows, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	code := callgrind.HasSymbols(exe)
	for i, r := range rows {
		if r.Contender != names[i] || r.PerOp <= 0 || len(r.Reps) != reps || r.Callers != 1 || r.CommandsPerOp < 1 ||
			(code && (len(r.CodeReps) != reps || r.CodePerOp <= 0 || r.CodePerOp >= r.PerOp)) || (!code && len(r.CodeReps) != 0) {
			t.Errorf("%s: instruction row %+v (symbols: %v)", section, r, code)
		}
	}
	t.Logf("%s: %+v", section, rows)
}

// TestPerOp checks the pairing of windows: (operation - baseline) / ops per contender and
// repetition, in repetition order, for the total and the code figure.
func TestPerOp(t *testing.T) {
	w := func(name string, rep int, baseline bool) instrWindow {
		return instrWindow{Contender: name, Rep: rep, Baseline: baseline}
	}
	prof := func(total, code int64) callgrind.Profile {
		return callgrind.Profile{Total: total, Self: map[string]int64{"runtime.x": total - code, "a.b": code}}
	}
	for _, tc := range []struct {
		name    string
		windows []instrWindow
		profs   []callgrind.Profile
		code    bool
		want    map[string]instrFigures
		err     string
	}{
		{name: "two contenders, two repetitions, rotated",
			windows: []instrWindow{w("a", 0, true), w("a", 0, false), w("b", 0, true), w("b", 0, false),
				w("b", 1, true), w("b", 1, false), w("a", 1, true), w("a", 1, false)},
			profs: []callgrind.Profile{prof(100, 10), prof(1100, 510), prof(100, 10), prof(2100, 1010),
				prof(100, 10), prof(2300, 1010), prof(200, 10), prof(1200, 530)},
			code: true,
			want: map[string]instrFigures{"a": {total: []float64{10, 10}, code: []float64{5, 5.2}}, "b": {total: []float64{20, 22}, code: []float64{10, 10}}}},
		{name: "no symbols: no code figure",
			windows: []instrWindow{w("a", 0, true), w("a", 0, false)}, profs: []callgrind.Profile{prof(100, 0), prof(300, 0)},
			want: map[string]instrFigures{"a": {total: []float64{2}}}},
		{name: "baseline missing", windows: []instrWindow{w("a", 0, false)}, profs: []callgrind.Profile{prof(1, 1)}, err: "missing"},
		{name: "two operation windows", windows: []instrWindow{w("a", 0, false), w("a", 0, false)},
			profs: []callgrind.Profile{prof(1, 1), prof(1, 1)}, err: "two windows"},
		{name: "no window", err: "no window"},
		{name: "dump unreadable", windows: []instrWindow{w("a", 0, true)}, err: "no dump"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := perOp(tc.windows, 100, tc.code, func(n int) (callgrind.Profile, error) {
				if n > len(tc.profs) {
					return callgrind.Profile{}, errors.New("no dump")
				}
				return tc.profs[n-1], nil
			})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestNoValgrind checks that a run without valgrind in $PATH says so in one line and measures
// everything else.
func TestNoValgrind(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := config{target: smokeTarget(), rounds: 1, duration: 30 * time.Millisecond, warmup: 10 * time.Millisecond,
		callers: []int{1}, sections: []string{sectionGCRA}, allocOps: 5, jsonPath: path, instructions: true, instrOps: 5, instrReps: 1}
	var out bytes.Buffer
	runOrEnd(t, cfg, &out)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep peers.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "instructions: not measured: "+callgrind.ErrNoValgrind.Error()); n != 1 || len(rep.GCRAInstructions) != 0 || len(rep.GCRA) == 0 {
		t.Errorf("%d notes, %d instruction rows, %d throughput rows; output:\n%s", n, len(rep.GCRAInstructions), len(rep.GCRA), out.String())
	}
}

// TestClusterSmoke runs the cluster section once on a testkit cluster.
// With COORDKIT_REDIS_URL naming a standalone server and no cluster URL, testkit reports the cluster
// unavailable: skipped outside CI, failed in CI, like every other cluster test.
func TestClusterSmoke(t *testing.T) {
	cfg := config{target: smokeTarget(), rounds: 1, duration: 30 * time.Millisecond, warmup: 10 * time.Millisecond,
		callers: []int{1}, sections: []string{sectionCluster}, handoffs: 1, allocOps: 1, clusterCallers: 4}
	var out bytes.Buffer
	r := &runner{cfg: cfg, prefix: "ckpeers:test", out: &out}
	rep := &peers.Report{}
	cl, err := r.clusterSection(context.Background(), rep)
	if errors.Is(err, testkit.ErrUnavailable) {
		testkit.FailOrSkip(t, err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if cl.Primaries != 3 || len(cl.Rows) != 2 || cl.Rows[0].Keys != onePrimary || cl.Rows[1].Keys != allPrimaries {
		t.Fatalf("cluster: %+v", cl)
	}
	for _, row := range cl.Rows {
		if row.OpsPerSec <= 0 || row.CommandsPerOp < 1 {
			t.Errorf("row %+v", row)
		}
	}
}

// TestAckSmoke runs the ack section once: two rows (off, WAIT 1) on a primary with one replica, the
// acknowledged one with one more command per cycle (the WAIT) and both with latencies.
func TestAckSmoke(t *testing.T) {
	cfg := config{target: smokeTarget(), rounds: 1, duration: 30 * time.Millisecond, warmup: 10 * time.Millisecond,
		callers: []int{1}, sections: []string{sectionAck}, handoffs: 1, allocOps: 1}
	var out bytes.Buffer
	r := &runner{cfg: cfg, prefix: "ckpeers:test", out: &out}
	a, err := r.ackSection(context.Background())
	if errors.Is(err, testkit.ErrUnavailable) {
		testkit.FailOrSkip(t, err)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(a.Rows) != 2 || a.Rows[0].Keys != ackOff || a.Rows[1].Keys != ackWait1 {
		t.Fatalf("ack: %+v", a)
	}
	for _, row := range a.Rows {
		if row.OpsPerSec <= 0 || row.P50 <= 0 || row.P99 < row.P50 {
			t.Errorf("row %+v", row)
		}
	}
	if a.Rows[1].CommandsPerOp <= a.Rows[0].CommandsPerOp {
		t.Errorf("WAIT 1 row has %.1f commands per cycle, off %.1f: the WAIT is missing", a.Rows[1].CommandsPerOp, a.Rows[0].CommandsPerOp)
	}
}

// TestCleanup checks that cleanup deletes this run's keys and no other.
func TestCleanup(t *testing.T) {
	s := testkit.Start(t, smokeTarget())
	ctx := context.Background()
	r := &runner{prefix: "ckpeers:cleanuptest", nodes: []*testkit.Server{s}, out: io.Discard}
	for _, k := range []string{"ckpeers:cleanuptest:a", "{ckpeers:cleanuptest:b}:lease", "rate:{ckpeers:cleanuptest:c}", "ckpeers:other:d"} {
		if _, err := s.Do(ctx, "SET", k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	r.cleanup(ctx)
	m, err := s.Do(ctx, "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := m.AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"ckpeers:other:d"}) {
		t.Errorf("keys after cleanup: %v, want only ckpeers:other:d", keys)
	}
}

var sinkBytes [][]byte

// TestAllocs checks that allocs counts the operation's allocations less the key-only baseline's.
func TestAllocs(t *testing.T) {
	alloc := func(n int) op {
		return func(context.Context, int64) error {
			for range n {
				sinkBytes = append(sinkBytes[:0], make([]byte, 64))
			}
			return nil
		}
	}
	sinkBytes = make([][]byte, 0, 8)
	got, err := allocs(context.Background(), 1000, alloc(3), alloc(1))
	if err != nil {
		t.Fatal(err)
	}
	if got < 1.9 || got > 2.1 {
		t.Errorf("allocs = %v per op, want 2 (3 less the baseline's 1)", got)
	}
}

// neverWoken is a hand-off whose waiter is never woken: it returns when its context ends.
type neverWoken struct{}

func (neverWoken) Name() string { return "never-woken" }
func (neverWoken) Hold(context.Context, string) (contenders.Release, error) {
	return func(context.Context) error { return nil }, nil
}
func (neverWoken) Wait(ctx context.Context, _ string) (contenders.Release, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (neverWoken) Close() {}

// TestHandoffStalls checks that a waiter never woken counts as a stall, without a latency, and
// does not end the run.
func TestHandoffStalls(t *testing.T) {
	defer func(d time.Duration) { handoffStall = d }(handoffStall)
	handoffStall = 30 * time.Millisecond
	r := &runner{prefix: "ckpeers:stalltest", out: io.Discard}
	lat, stalls, err := r.handoffs(context.Background(), neverWoken{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 0 || stalls != 2 {
		t.Errorf("latencies %v, stalls %d; want none and 2", lat, stalls)
	}
}

func TestFairWaiterSpec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		spec string
		ok   bool
	}{
		{[]string{"-fair-waiter=127.0.0.1:6379,n,200ms"}, "127.0.0.1:6379,n,200ms", true},
		{[]string{"-fair-waiter="}, "", true}, // the child reports the malformed spec
		{nil, "", false},
		{[]string{"-only=fair"}, "", false},
		{[]string{"-fair-waiter=a,n,1s", "-only=fair"}, "", false},
		{[]string{"-fair-waiters=3"}, "", false},
	} {
		spec, ok := fairWaiterSpec(tc.args)
		if spec != tc.spec || ok != tc.ok {
			t.Errorf("fairWaiterSpec(%q) = %q, %v; want %q, %v", tc.args, spec, ok, tc.spec, tc.ok)
		}
	}
	for _, bad := range []string{"", "a,n", "a,n,x", "a,n,1s,extra"} {
		if code := runFairWaiter(bad, io.Discard); code != 1 {
			t.Errorf("runFairWaiter(%q) = %d, want 1", bad, code)
		}
	}
}

func TestFairVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *peers.Fair
		want bool
	}{
		{"not run", nil, false},
		{"clean", &peers.Fair{FIFO: peers.FairFIFO{Grants: 64}}, false},
		{"order", &peers.Fair{FIFO: peers.FairFIFO{OrderViolations: 1}}, true},
		{"token", &peers.Fair{FIFO: peers.FairFIFO{TokenViolations: 2}}, true},
	} {
		if err := fairVerdict(tc.f); errors.Is(err, errFairViolation) != tc.want || (err != nil) != tc.want {
			t.Errorf("%s: fairVerdict = %v, want a violation: %v", tc.name, err, tc.want)
		}
	}
}

// TestFairSmoke runs the fair section once, briefly (4 waiters, one repetition of each killed-waiter
// case: the child is this test binary, see TestMain), and checks its JSON: every waiter granted in
// queue order with increasing tokens, and a delay for each case. Timing is not checked; a waiter
// killed after its slice is never granted the lease (its waiter key is gone), whatever the timing.
func TestFairSmoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	cfg := config{target: smokeTarget(), rounds: 1, duration: 30 * time.Millisecond, callers: []int{1},
		sections: []string{sectionFair}, handoffs: 1, allocOps: 1, fairWaiters: 4, jsonPath: path}
	var out bytes.Buffer
	runOrEnd(t, cfg, &out)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep peers.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	f := rep.Fair
	if f == nil {
		t.Fatalf("no fair section in %s", b)
	}
	if q := f.FIFO; q.Rounds != 1 || q.Waiters != 4 || q.Grants != 4 || q.OrderViolations != 0 || q.TokenViolations != 0 ||
		q.LoadCycles <= 0 || q.P50Ms <= 0 || q.P99Ms < q.P50Ms {
		t.Errorf("FIFO: %+v", q)
	}
	k := f.Killed
	if k.SliceMs != 200 || k.DeadTTLMs != 2000 || len(k.InSlice.Ms) != 1 || len(k.InSlice.SliceLeftMs) != 1 || len(k.AfterSlice.Ms) != 1 || k.InSlice.MinMs <= 0 || k.AfterSlice.MinMs <= 0 ||
		k.AfterSlice.DeadGrants != 0 || k.AfterSlice.SliceLeftMs[0] != 0 || f.Seconds <= 0 {
		t.Errorf("killed waiter: %+v", f)
	}
	t.Log(out.String())
	for _, want := range []string{"Fair lock FIFO under load", "Killed waiter", "within its slice", "after its slice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
