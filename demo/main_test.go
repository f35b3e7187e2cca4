package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.GoleakOptions()...)
}

// The scenario, as `make demo` runs it, ends with "RESULT ok" on Redis 7.0.
func TestScenario(t *testing.T) {
	srv := testkit.Start(t, testkit.Redis70)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	ok := runSteps(ctx, newEnv(srv, config{workers: 5, rounds: 20}), steps, &out)
	t.Logf("demo output:\n%s", out.String())
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !ok || !strings.HasPrefix(last, "RESULT ok ") {
		t.Fatalf("runSteps = %v, last line %q", ok, last)
	}
	if n := strings.Count(out.String(), "RESULT "); n != 1 {
		t.Errorf("%d RESULT lines, want exactly 1", n)
	}
}

// A failing step turns into one "RESULT fail" line naming it.
func TestRunStepsReportsFailure(t *testing.T) {
	failing := []step{{name: "broken", run: func(context.Context, *env) (stepResult, error) {
		var r stepResult
		r.check("something holds", false, "it did not")
		return r, nil
	}}}
	e := &env{config: config{workers: 2, rounds: 1}, server: "none", elapsed: func() time.Duration { return 0 }}
	var out bytes.Buffer
	if runSteps(context.Background(), e, failing, &out) {
		t.Fatal("runSteps reported ok for a failed check")
	}
	if !strings.HasSuffix(out.String(), "RESULT fail broken: something holds: it did not\n") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// Bad flags exit with 2 before any server is started.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "1"}, {"-rounds", "0"}, {"-target", "nope"}, {"-bogus"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile(nil) = %v", got)
	}
}
