// Command peers runs Coordkit side by side with its peers on one server, in one run: lock cycles
// (TryAcquire + Release) of Coordkit, rueidislock, bsm/redislock, redsync and the raw two-script
// ceiling at several caller counts; the contended hand-off (p50/p99); GCRA decisions of Coordkit,
// go-redis/redis_rate and a raw one-script ceiling on a hot key and on spread keys; the fair lock's
// FIFO order and fencing tokens under load and the delay of a killed waiter; and, for each,
// server commands and server time per operation (INFO commandstats, INFO cpu) and client
// allocations per operation. Every measurement uses fresh keys; every section warms up first and
// runs several rounds in rotated order, and reports medians. It prints ratio tables and, with
// -json, writes the figures as JSON.
//
//	go run ./cmd/peers                               # Redis 8 via testkit, every section
//	go run ./cmd/peers -target=valkey9 -json out.json
//	COORDKIT_REDIS_URL=redis://10.0.0.5:6379 go run ./cmd/peers   # a server of one's own
//	go run ./cmd/peers -only=cluster                 # 1 vs 3 primaries of a testkit cluster
//	go run ./cmd/peers -only=fair                    # the fair lock's order, fencing, killed waiter
//	go run ./cmd/peers -only=ack                     # the lock cycle with and without WAIT 1 (a primary with one replica)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordkit/testkit"
)

func main() {
	if code, ok := childMain(); ok { // the instruction phase's child, under callgrind
		os.Exit(code)
	}
	if spec, ok := fairWaiterSpec(os.Args[1:]); ok { // the fair section's killed-waiter child
		os.Exit(runFairWaiter(spec, os.Stderr))
	}
	cfg, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// Sections of a run, in the order they run.
const (
	sectionLock    = "lock"
	sectionHandoff = "handoff"
	sectionGCRA    = "gcra"
	sectionFair    = "fair"
	sectionCluster = "cluster"
	// sectionAck runs Coordkit's lock cycle on a primary with one replica, without and with the
	// replica acknowledgement (lock.WithReplicaAck, WAIT 1).
	sectionAck = "ack"
	// sectionConditional (opt-in) runs Coordkit's lock cycle, and the cycle with one Extend, with the
	// scripts only (lock.WithConditionalCommands(false)) and with the defaults (SET IFEQ, DELIFEQ /
	// DELEX IFEQ where the server has them).
	sectionConditional = "conditional"
)

var allSections = []string{sectionLock, sectionHandoff, sectionGCRA, sectionFair, sectionCluster, sectionConditional, sectionAck}

// config is a run's settings (the flags).
type config struct {
	target         testkit.Target
	rounds         int
	duration       time.Duration
	warmup         time.Duration
	callers        []int
	sections       []string
	handoffs       int
	allocOps       int
	clusterCallers int
	fairWaiters    int
	jsonPath       string
	instructions   bool // the instruction phase (when valgrind is found)
	instrOps       int  // operations of one window of the instruction phase
	instrReps      int  // repetitions of the instruction phase
}

func (c config) has(section string) bool {
	for _, s := range c.sections {
		if s == section {
			return true
		}
	}
	return false
}

// parseFlags parses args into a config.
func parseFlags(fs *flag.FlagSet, args []string) (config, error) {
	var c config
	target := fs.String("target", string(testkit.Redis8), "server target started by testkit: redis70, redis8, valkey8, valkey9 (with $"+testkit.EnvRedisURL+" set, that server is used and this only labels it)")
	fs.IntVar(&c.rounds, "rounds", 5, "rounds per measurement (medians over them; the contenders' order rotates every round)")
	fs.DurationVar(&c.duration, "duration", 500*time.Millisecond, "duration of one throughput measurement (one contender, one caller count, one round)")
	fs.DurationVar(&c.warmup, "warmup", 200*time.Millisecond, "warm-up of each contender before the rounds")
	callers := fs.String("callers", "1,8,64", "caller (goroutine) counts, comma-separated")
	only := fs.String("only", "lock,handoff,gcra,fair,ack", "sections to run, comma-separated, of: "+strings.Join(allSections, ","))
	fs.IntVar(&c.handoffs, "handoffs", 30, "hand-offs per contender per round")
	fs.IntVar(&c.allocOps, "alloc-ops", 3000, "operations of the single-goroutine allocation phase, per contender")
	fs.IntVar(&c.clusterCallers, "cluster-callers", 64, "callers of the cluster section")
	fs.IntVar(&c.fairWaiters, "fair-waiters", 64, "waiters queued per round of the fair section's FIFO check")
	fs.StringVar(&c.jsonPath, "json", "", "write the figures as JSON to this file")
	fs.BoolVar(&c.instructions, "instructions", true, "count client instructions per operation of the lock and gcra contenders under valgrind's callgrind (skipped, with a note, when valgrind is not in $PATH)")
	fs.IntVar(&c.instrOps, "instr-ops", 400, "operations of one callgrind window (per contender and repetition) of the instruction phase")
	fs.IntVar(&c.instrReps, "instr-reps", 3, "repetitions of the instruction phase's windows (the table shows their median and spread; the JSON each)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.target = testkit.Target(*target)
	if !c.target.Known() {
		return c, fmt.Errorf("unknown target %q (known: %v)", *target, testkit.AllTargets())
	}
	var err error
	if c.callers, err = parseInts(*callers); err != nil {
		return c, fmt.Errorf("-callers: %w", err)
	}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		known := false
		for _, a := range allSections {
			known = known || a == s
		}
		if !known {
			return c, fmt.Errorf("-only: unknown section %q (known: %s)", s, strings.Join(allSections, ","))
		}
		c.sections = append(c.sections, s)
	}
	switch {
	case len(c.sections) == 0:
		return c, fmt.Errorf("-only: no section")
	case c.rounds < 1 || c.handoffs < 1 || c.allocOps < 1 || c.clusterCallers < 1 || c.instrOps < 1 || c.instrReps < 1 || c.fairWaiters < 1:
		return c, fmt.Errorf("-rounds, -handoffs, -alloc-ops, -cluster-callers, -instr-ops, -instr-reps and -fair-waiters must be at least 1")
	case c.duration <= 0 || c.warmup < 0:
		return c, fmt.Errorf("-duration must be positive and -warmup not negative")
	}
	return c, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// writeJSON writes v, indented, to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// logf prints a progress line to w.
func logf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
