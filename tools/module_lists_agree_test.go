package tools

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The module lists are written in four places; the Makefile's RELEASED and UNRELEASED are the source.
// TestModuleListsAgree fails when go.work, versions.yaml or the CI workflow's matrices name another set.
func TestModuleListsAgree(t *testing.T) {
	root := filepath.Join("..")
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	makefile, work, versions, ci := read("Makefile"), read("go.work"), read("versions.yaml"), read(".github/workflows/ci.yml")

	makeList := func(name string) []string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*(.*)$`).FindStringSubmatch(makefile)
		if m == nil {
			t.Fatalf("Makefile: no %s list", name)
		}
		return strings.Fields(m[1])
	}
	released, unreleased := makeList("RELEASED"), makeList("UNRELEASED")
	all := append(slices.Clone(released), unreleased...)

	var used []string
	for _, m := range regexp.MustCompile(`(?m)^\s*\./(\S+)\s*$`).FindAllStringSubmatch(work, -1) {
		used = append(used, m[1])
	}

	sets, excluded, ok := strings.Cut(versions, "\nexcluded-modules:")
	if !ok {
		t.Fatal("versions.yaml: no excluded-modules list")
	}
	paths := func(s string) []string {
		var dirs []string
		for _, m := range regexp.MustCompile(`(?m)^\s*- github\.com/coordkit/coordkit/(\S+)\s*$`).FindAllStringSubmatch(s, -1) {
			dirs = append(dirs, m[1])
		}
		return dirs
	}
	notCLI := slices.DeleteFunc(slices.Clone(unreleased), func(m string) bool { return m == "coordctl" })

	matrix := func(job string) []string {
		t.Helper()
		i := strings.Index(ci, "\n  "+job+":\n")
		if i < 0 {
			t.Fatalf("ci.yml: no %s job", job)
		}
		m := regexp.MustCompile(`module: \[([^\]]*)\]`).FindStringSubmatch(ci[i:])
		if m == nil {
			t.Fatalf("ci.yml: %s job has no module matrix", job)
		}
		var mods []string
		for _, f := range strings.Split(m[1], ",") {
			mods = append(mods, strings.TrimSpace(f))
		}
		if job == "integration" && strings.Contains(ci[i:], "{module: integration,") {
			mods = append(mods, "integration")
		}
		return mods
	}

	for _, c := range []struct {
		where string
		got   []string
		want  []string
	}{
		{"go.work use lines (want every Makefile module)", used, all},
		{"versions.yaml module-sets (want RELEASED and coordctl)", paths(sets), append(slices.Clone(released), "coordctl")},
		{"versions.yaml excluded-modules (want UNRELEASED but coordctl)", paths(excluded), notCLI},
		{"ci.yml lint matrix (want every module)", matrix("lint"), all},
		{"ci.yml unit matrix (want RELEASED)", matrix("unit"), released},
		{"ci.yml integration matrix (want UNRELEASED)", matrix("integration"), unreleased},
	} {
		got, want := slices.Sorted(slices.Values(c.got)), slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", c.where, got, want)
		}
	}
}
