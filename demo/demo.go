package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/testkit"
)

// config is what the flags set for every step.
type config struct {
	workers int // concurrent workers, each with its own client
	rounds  int // acquisitions per worker
}

func (c config) validate() error {
	if c.workers < 2 {
		return fmt.Errorf("-workers must be at least 2 (one stalls, another takes over), got %d", c.workers)
	}
	if c.rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1, got %d", c.rounds)
	}
	return nil
}

// env is what a step gets: the server, the run's settings, and a way to make clients.
type env struct {
	config
	server  string               // "redis 7.0.15 (process, 127.0.0.1:40123)"
	option  rueidis.ClientOption // options for a client of the server
	prefix  string               // key prefix unique to this run, so an external server's data is never touched
	elapsed func() time.Duration // time since the run started
}

func newEnv(srv *testkit.Server, cfg config) *env {
	start := time.Now()
	return &env{
		config:  cfg,
		server:  fmt.Sprintf("%s %s (%s, %s)", srv.Flavor, srv.Version, srv.Backend, srv.Addr),
		option:  srv.ClientOption(),
		prefix:  "coordkit-demo:" + runID() + ":",
		elapsed: func() time.Duration { return time.Since(start) },
	}
}

// runID returns 8 random hex characters.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// trackedClient returns a new client of the server wired to a new invalidation tracker (RESP3
// client-side caching), as every waiting primitive wants. The caller closes the client.
func (e *env) trackedClient() (rueidis.Client, *luakit.Tracker, error) {
	t := luakit.NewTracker()
	c, err := luakit.NewTrackedClient(e.option, t)
	if err != nil {
		return nil, nil, err
	}
	return c, t, nil
}

// step is one part of the scenario. Later primitives (semaphores, rate limiters, ...) append theirs to
// steps; each runs on the same server, in order.
type step struct {
	name string
	run  func(ctx context.Context, e *env) (stepResult, error)
}

// steps is the scenario, in order.
var steps = []step{
	{name: "fenced lock", run: fencedLockStep},
	{name: "batch latch", run: latchStep},
	{name: "quota counter", run: counterStep},
	{name: "idempotent payments", run: idempotencyStep},
	{name: "leader election", run: leaderStep},
	{name: "export permits", run: semaphoreStep},
	{name: "rate limit", run: rateLimitStep},
}

// stepResult is what a step reports: rows for its table, the invariants it checked, and a short
// summary for the RESULT line.
type stepResult struct {
	rows    []row
	checks  []check
	summary string
}

// row is one line of a step's table.
type row struct{ label, value string }

// check is one invariant: ok, or what broke.
type check struct {
	name   string
	ok     bool
	detail string // shown when it failed (and when it passed, if set)
}

func (r *stepResult) add(label, format string, args ...any) {
	r.rows = append(r.rows, row{label, fmt.Sprintf(format, args...)})
}

func (r *stepResult) check(name string, ok bool, format string, args ...any) {
	r.checks = append(r.checks, check{name: name, ok: ok, detail: fmt.Sprintf(format, args...)})
}

// failed returns the names (and details) of the failed checks.
func (r *stepResult) failed() []string {
	var out []string
	for _, c := range r.checks {
		if !c.ok {
			out = append(out, c.name+": "+c.detail)
		}
	}
	return out
}

// runSteps runs every step, prints its table and checks to w, and ends with the RESULT line. It
// reports whether every step ran and every invariant held.
func runSteps(ctx context.Context, e *env, steps []step, w io.Writer) bool {
	fmt.Fprintf(w, "coordkit demo: %d workers x %d rounds on %s\n", e.workers, e.rounds, e.server)
	var summaries, failures []string
	for i, s := range steps {
		fmt.Fprintf(w, "\n[%d/%d] %s\n", i+1, len(steps), s.name)
		start := time.Now()
		res, err := s.run(ctx, e)
		if err != nil {
			fmt.Fprintf(w, "  error: %v\n", err)
			failures = append(failures, fmt.Sprintf("%s: %v", s.name, err))
			continue
		}
		res.add("step time", "%v", time.Since(start).Round(time.Millisecond))
		printTable(w, e, res)
		if f := res.failed(); len(f) > 0 {
			failures = append(failures, s.name+": "+strings.Join(f, "; "))
		} else {
			summaries = append(summaries, s.name+": "+res.summary)
		}
	}
	fmt.Fprintln(w)
	if len(failures) > 0 {
		fmt.Fprintf(w, "RESULT fail %s\n", strings.Join(failures, " | "))
		return false
	}
	fmt.Fprintf(w, "RESULT ok %s; %d step(s) in %v\n", strings.Join(summaries, "; "), len(steps),
		e.elapsed().Round(time.Millisecond))
	return true
}

func printTable(w io.Writer, e *env, res stepResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\t%s\n", "server", e.server)
	for _, r := range res.rows {
		fmt.Fprintf(tw, "  %s\t%s\n", r.label, r.value)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "  invariants:")
	for _, c := range res.checks {
		mark := "ok  "
		if !c.ok {
			mark = "FAIL"
		}
		if c.detail != "" {
			fmt.Fprintf(w, "    %s %s (%s)\n", mark, c.name, c.detail)
		} else {
			fmt.Fprintf(w, "    %s %s\n", mark, c.name)
		}
	}
}

// closeAll closes every client.
func closeAll(clients []rueidis.Client) {
	for _, c := range clients {
		c.Close()
	}
}
