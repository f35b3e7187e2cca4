package matrix

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Run runs fn once per target of targets, each as a parallel subtest of t named after the target, at
// most MaxParallelTargets at once (see TakeSlot). It is the runner of every suite, on Targets,
// SentinelTargets or a Select of them.
func Run(t *testing.T, targets []Target, fn func(t *testing.T, mt Target)) {
	t.Helper()
	for _, mt := range targets {
		t.Run(mt.Name, func(t *testing.T) {
			t.Parallel()
			TakeSlot(t)
			fn(t, mt)
		})
	}
}

// RunInOrder runs fn once per target of targets, each as a subtest of t named after the target, one
// after the other and without a slot: for a test that must not overlap another target's (a failover,
// a process-wide setting).
func RunInOrder(t *testing.T, targets []Target, fn func(t *testing.T, mt Target)) {
	t.Helper()
	for _, mt := range targets {
		t.Run(mt.Name, func(t *testing.T) { fn(t, mt) })
	}
}

// Select returns the targets for which keep reports true, in order.
func Select(targets []Target, keep func(Target) bool) []Target {
	var out []Target
	for _, mt := range targets {
		if keep(mt) {
			out = append(out, mt)
		}
	}
	return out
}

// Standalone reports whether mt is a single server: neither a cluster nor a Sentinel group. With
// Select it keeps the targets that a proxy or a process fault can drive.
func (mt Target) Standalone() bool { return !mt.Cluster && !mt.Sentinel }

// Skipped reports whether reasons (scenario name → why it does not run on this target) lists
// scenario, and if so logs the reason on t.
func Skipped(t testing.TB, reasons map[string]string, scenario string) bool {
	t.Helper()
	why, ok := reasons[scenario]
	if ok {
		t.Logf("%s: not on target %s (%s)", scenario, t.Name(), why)
	}
	return ok
}

// CheckNumbers returns an error naming every number that prefixes more than one of the scenario
// names ("11_binary_keys" is number 11); names without a number prefix are not checked. A suite
// calls it on its scenario table so that a number given twice fails the suite.
func CheckNumbers(names []string) error {
	first := map[int]string{}
	var dups []string
	for _, n := range names {
		num, _, ok := strings.Cut(n, "_")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		if prev, seen := first[i]; seen {
			dups = append(dups, fmt.Sprintf("%d (%s, %s)", i, prev, n))
			continue
		}
		first[i] = n
	}
	if len(dups) > 0 {
		return fmt.Errorf("scenario numbers given twice: %s", strings.Join(dups, "; "))
	}
	return nil
}

// RequireNumbersOnce fails t when CheckNumbers finds a number given twice among names.
func RequireNumbersOnce(t testing.TB, names []string) {
	t.Helper()
	if err := CheckNumbers(names); err != nil {
		t.Fatal(err)
	}
}
