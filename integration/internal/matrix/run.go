package matrix

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Run runs fn once per target of targets, each as a parallel subtest of t named after the target, at
// most MaxParallelTargets at once (see TakeSlot). It is the runner of every suite, on Targets,
// SentinelTargets or a Select of them. A test that must not overlap another target's (a Sentinel
// failover, a process-wide setting) loops over the targets itself.
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
		t.Logf("%s: not on this target (%s)", scenario, why)
	}
	return ok
}

// CheckNames returns an error naming every scenario name given twice and every number that
// prefixes more than one name ("11_binary_keys" is number 11; names without a number prefix are
// checked as names only).
func CheckNames(names []string) error {
	seen := map[string]bool{}
	first := map[int]string{}
	var dups []string
	for _, n := range names {
		if seen[n] {
			dups = append(dups, fmt.Sprintf("name %s", n))
			continue
		}
		seen[n] = true
		num, _, ok := strings.Cut(n, "_")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		if prev, taken := first[i]; taken {
			dups = append(dups, fmt.Sprintf("number %d (%s, %s)", i, prev, n))
			continue
		}
		first[i] = n
	}
	if len(dups) > 0 {
		return fmt.Errorf("scenarios given twice: %s", strings.Join(dups, "; "))
	}
	return nil
}

// RequireNamedOnce fails t when CheckNames finds a name or a number given twice among the names of
// list (name returns a scenario's name). A suite calls it on its scenario table before running it.
func RequireNamedOnce[S any](t testing.TB, list []S, name func(S) string) {
	t.Helper()
	names := make([]string, len(list))
	for i, sc := range list {
		names[i] = name(sc)
	}
	if err := CheckNames(names); err != nil {
		t.Fatal(err)
	}
}

// Scenario is one behaviour a suite checks on each target, run on that target's env E (the suite's
// env, which embeds *Env).
type Scenario[E any] struct {
	// Name is the subtest name: "NN_what_it_checks" in a numbered suite.
	Name string
	// Run checks the behaviour on e, on keys of its own.
	Run func(t *testing.T, e E)
	// StandaloneOnly: the scenario drives one server process (pause, stop, proxy) and runs only on a
	// standalone target, not on a cluster or a Sentinel group.
	StandaloneOnly bool
}

// RunScenarios runs list on target mt's env e, in order, each as a subtest of t named after it,
// after RequireNamedOnce. It leaves out, with the reason logged, a scenario that skip (name → why)
// lists, and a StandaloneOnly scenario on a cluster or a Sentinel target.
func RunScenarios[E any](t *testing.T, mt Target, e E, list []Scenario[E], skip map[string]string) {
	t.Helper()
	RequireNamedOnce(t, list, func(sc Scenario[E]) string { return sc.Name })
	for _, sc := range list {
		if Skipped(t, skip, sc.Name) {
			continue
		}
		if sc.StandaloneOnly && !mt.Standalone() {
			t.Logf("%s: not on this target (standalone targets only: it drives one server process)", sc.Name)
			continue
		}
		t.Run(sc.Name, func(t *testing.T) { sc.Run(t, e) })
	}
}
