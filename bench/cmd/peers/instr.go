package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/bench/internal/callgrind"
	"github.com/coordkit/coordkit/bench/internal/contenders"
	"github.com/coordkit/coordkit/bench/internal/peers"
	"github.com/coordkit/coordkit/testkit"
)

// The instruction phase: the runner runs itself again under callgrind (callgrind.Command), the
// child mode selected by the environment variable instrJobEnv holding an instrJob. The child builds
// the section's contenders against the same server, warms each up, and then, for every repetition
// and contender (in an order rotated every repetition), runs two windows of ops operations on one
// goroutine: the runner's own part of the operation alone (the baseline: key building, loop), then
// the whole operation. Callgrind writes every thread's instruction count of each window to a dump
// (callgrind.WindowStart, callgrind.WindowEnd), and the child prints the windows in order on
// stdout. A contender's instructions per operation are (operation window - baseline window) / ops:
// the rueidis and go-redis reader and writer goroutines included, the process's start-up, the
// clients' connection set-up and the runner's own work left out.

// instrJobEnv names the environment variable that selects the child mode.
const instrJobEnv = "CKPEERS_CALLGRIND_JOB"

// instrWarmup is the operations of each contender before the windows: scripts loaded, connections
// made, first-call paths taken.
const instrWarmup = 20

// instrJob is the child's task.
type instrJob struct {
	Section string `json:"section"` // sectionLock or sectionGCRA
	Target  string `json:"target"`  // testkit target label (the server is testkit's EnvRedisURL)
	Prefix  string `json:"prefix"`  // key prefix (contains the parent's, so its cleanup deletes them)
	Ops     int    `json:"ops"`
	Reps    int    `json:"reps"`
}

// instrWindow is one window of the child, in dump order.
type instrWindow struct {
	Contender string `json:"contender"`
	Rep       int    `json:"rep"`
	Baseline  bool   `json:"baseline"`
}

// instrOps returns the section's contenders' operation and baseline constructors (each call makes
// a fresh operation on fresh keys), by name, and the names in table order.
func (r *runner) instrOps(section string, srv contenders.Server) (names []string, ops map[string][2]func() op, closeAll func(), err error) {
	ops = map[string][2]func() op{}
	switch section {
	case sectionLock:
		locks, closeAll, err := contenders.Build(contenders.Locks, srv)
		if err != nil {
			return nil, nil, nil, err
		}
		for name, l := range locks {
			ops[name] = [2]func() op{func() op { return r.lockOp(l, "ci") }, func() op { return r.keyOnlyOp("cb") }}
		}
		return contenders.LockNames(), ops, closeAll, nil
	case sectionGCRA:
		ds, closeAll, err := contenders.Build(contenders.Deciders, srv)
		if err != nil {
			return nil, nil, nil, err
		}
		for name, d := range ds {
			ops[name] = [2]func() op{func() op { return r.gcraOp(d, keysHot) }, func() op { return noOp }}
		}
		return contenders.DeciderNames(), ops, closeAll, nil
	}
	return nil, nil, nil, fmt.Errorf("no instruction phase for section %q", section)
}

// instrChild runs job (the child mode, under callgrind) and writes its windows, in order, as JSON
// to out.
func instrChild(ctx context.Context, job instrJob, out io.Writer) error {
	s, err := testkit.Launch(ctx, testkit.Target(job.Target))
	if err != nil {
		return err
	}
	defer s.Close()
	r := &runner{prefix: job.Prefix, out: io.Discard}
	r.sample.Store(1000)       // 4-digit measurement numbers: every window's keys have the same lengths
	runtime.MemProfileRate = 0 // no allocation sampled at random for the memory profile
	names, ops, closeAll, err := r.instrOps(job.Section, contenders.FromTestkit(s))
	if err != nil {
		return err
	}
	defer closeAll()
	runOps := func(f op, n int) error {
		for i := range n {
			if err := f(ctx, int64(i)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range names {
		if err := runOps(ops[name][0](), instrWarmup); err != nil {
			return fmt.Errorf("%s warm-up: %w", name, err)
		}
	}
	var windows []instrWindow
	for rep := range job.Reps {
		for _, name := range peers.Rotate(names, rep) {
			for _, baseline := range []bool{true, false} {
				f := ops[name][0]()
				if baseline {
					f = ops[name][1]()
				}
				callgrind.WindowStart()
				err := runOps(f, job.Ops)
				callgrind.WindowEnd()
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				windows = append(windows, instrWindow{Contender: name, Rep: rep, Baseline: baseline})
			}
		}
	}
	return json.NewEncoder(out).Encode(windows)
}

// childMain runs the child mode when the environment selects it: ok reports whether it did, and
// the process must then exit with code.
func childMain() (code int, ok bool) {
	v := os.Getenv(instrJobEnv)
	if v == "" {
		return 0, false
	}
	var job instrJob
	if err := json.Unmarshal([]byte(v), &job); err != nil {
		fmt.Fprintln(os.Stderr, "peers: instruction child:", err)
		return 2, true
	}
	if err := instrChild(context.Background(), job, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers: instruction child:", err)
		return 1, true
	}
	return 0, true
}

// instructions runs the instruction phase of section in a child process under valgrind and returns
// every contender's instructions per operation, one figure per repetition, by name.
func (r *runner) instructions(ctx context.Context, section string) (map[string]instrFigures, error) {
	if os.Getenv(instrJobEnv) != "" { // a child that ran the runner instead of its job: no grandchild
		return nil, fmt.Errorf("%s is set in the runner's own environment", instrJobEnv)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ckpeers-callgrind-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	job, err := json.Marshal(instrJob{Section: section, Target: string(r.cfg.target), Prefix: r.prefix + ":cg",
		Ops: r.cfg.instrOps, Reps: r.cfg.instrReps})
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "callgrind.out")
	ctx, cancel := context.WithTimeout(ctx, instrTimeout)
	defer cancel()
	cmd := callgrind.Command(ctx, r.valgrind, out, exe, nil, instrJobEnv+"="+string(job), testkit.EnvRedisURL+"="+r.url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s%s", err, stderr.Bytes(), callgrind.Log(out, 2000))
	}
	var windows []instrWindow
	if err := json.Unmarshal(stdout.Bytes(), &windows); err != nil {
		return nil, fmt.Errorf("child output %q: %w", stdout.Bytes(), err)
	}
	code := callgrind.HasSymbols(exe)
	if !code {
		logf(r.out, "instructions (%s): %s has no symbol table (go run strips it; go run -ldflags=-s=false keeps it): total instructions only, no code instr/op", section, exe)
	}
	return perOp(windows, r.cfg.instrOps, code, func(n int) (callgrind.Profile, error) { return callgrind.ParseFile(callgrind.DumpPath(out, n)) })
}

// instrTimeout bounds one instruction phase.
const instrTimeout = 10 * time.Minute

// instrFigures is a contender's instructions per operation, one figure per repetition: every
// instruction (total) and those of Go code outside the runtime (code; nil without symbols).
type instrFigures struct{ total, code []float64 }

// perOp pairs every operation window with the baseline window of the same contender and
// repetition (profile(n) is the n-th window's dump, from 1) and returns each contender's
// (operation - baseline) / ops, one figure per repetition, of the total and, when code, of
// callgrind.GoCode functions.
func perOp(windows []instrWindow, ops int, code bool, profile func(n int) (callgrind.Profile, error)) (map[string]instrFigures, error) {
	type key struct {
		name string
		rep  int
	}
	type counts struct {
		total, code [2]int64 // baseline, operation
		seen        [2]bool
	}
	byKey := map[key]*counts{}
	var order []key
	for i, w := range windows {
		p, err := profile(i + 1)
		if err != nil {
			return nil, err
		}
		k, j := key{w.Contender, w.Rep}, 1
		if w.Baseline {
			j = 0
		}
		c := byKey[k]
		if c == nil {
			c = &counts{}
			byKey[k] = c
			order = append(order, k)
		}
		if c.seen[j] {
			return nil, fmt.Errorf("%s repetition %d: two windows of one kind", k.name, k.rep)
		}
		c.total[j], c.code[j], c.seen[j] = p.Total, p.Sum(callgrind.GoCode), true
	}
	slices.SortStableFunc(order, func(a, b key) int { return a.rep - b.rep })
	res := map[string]instrFigures{}
	for _, k := range order {
		c := byKey[k]
		if !c.seen[0] || !c.seen[1] {
			return nil, fmt.Errorf("%s repetition %d: a window is missing", k.name, k.rep)
		}
		f := res[k.name]
		f.total = append(f.total, float64(c.total[1]-c.total[0])/float64(ops))
		if code {
			f.code = append(f.code, float64(c.code[1]-c.code[0])/float64(ops))
		}
		res[k.name] = f
	}
	if len(res) == 0 {
		return nil, errors.New("no window")
	}
	return res, nil
}

// instrRows returns the instruction rows of names (in that order) from their per-repetition
// figures, with the server figures of the throughput row of the same contender at the smallest
// caller count (and keys, when given) beside them.
func instrRows(names []string, perRep map[string]instrFigures, ops int, rows []peers.Throughput, keys string) []peers.Instructions {
	var out []peers.Instructions
	for _, name := range names {
		f := perRep[name]
		in := peers.Instructions{Contender: name, PerOp: peers.Median(f.total), Reps: f.total, CodePerOp: peers.Median(f.code), CodeReps: f.code, Ops: ops}
		callers := 0
		for _, row := range rows {
			if row.Contender == name && row.Keys == keys && (callers == 0 || row.Callers < callers) {
				callers, in.Callers = row.Callers, row.Callers
				in.CommandsPerOp, in.CmdstatUsecPerOp, in.CPUUsecPerOp = row.CommandsPerOp, row.CmdstatUsecPerOp, row.CPUUsecPerOp
			}
		}
		out = append(out, in)
	}
	return out
}

// instrPhase runs the instruction phase of section when it is on and returns its rows and the
// title of their table (title and the phase's settings); a phase that fails is printed as a note,
// not returned (nil rows).
func (r *runner) instrPhase(ctx context.Context, section, title string, names []string, rows []peers.Throughput, keys string) ([]peers.Instructions, string) {
	if r.valgrind == "" || (section != sectionLock && section != sectionGCRA) {
		return nil, ""
	}
	start := time.Now()
	perRep, err := r.instructions(ctx, section)
	if err != nil {
		logf(r.out, "instructions (%s): not measured: %v", section, err)
		return nil, ""
	}
	return instrRows(names, perRep, r.cfg.instrOps, rows, keys), title + " (callgrind, one goroutine, " + strconv.Itoa(r.cfg.instrReps) +
		" repetitions of " + strconv.Itoa(r.cfg.instrOps) + " operations; the phase took " + time.Since(start).Round(time.Second).String() + ")"
}
