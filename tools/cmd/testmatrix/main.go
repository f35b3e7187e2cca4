// Command testmatrix turns `go test -json` output into the server-matrix summary: one row per suite
// (test package), one column per server target, each cell pass / FAIL / skip / - (not run).
//
//	go test -json ./... | go run github.com/coordkit/coordkit/tools/cmd/testmatrix -title "workspace"
//
// Integration suites name their top-level subtests after the target (TestLock/redis70/...,
// TestLock/redis-cluster/...; see integration/internal/matrix). testmatrix echoes each package's result
// line like go test does, prints the full output of every failing test and package, and exits 1 when
// any test or package failed, so it can stand in for plain `go test` in scripts.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type cell int

const (
	notRun cell = iota
	skipped
	passed
	failed
)

func (c cell) String() string {
	return [...]string{"-", "skip", "pass", "FAIL"}[c]
}

// merge combines the results of several tests of one suite on one target: any failure fails the cell,
// any pass beats skips.
func merge(a, b cell) cell { return max(a, b) }

type matrix struct {
	targets []string
	known   map[string]bool
	cells   map[string]map[string]cell // suite → target → result
	suites  []string
	output  map[string][]string // package + "\x00" + test → buffered output
	failed  bool
	out     io.Writer
}

func newMatrix(targets []string, out io.Writer) *matrix {
	m := &matrix{targets: targets, known: map[string]bool{}, cells: map[string]map[string]cell{},
		output: map[string][]string{}, out: out}
	for _, t := range targets {
		m.known[t] = true
	}
	return m
}

func (m *matrix) suite(pkg string) string { return path.Base(pkg) }

func (m *matrix) record(suite, target string, c cell) {
	row, ok := m.cells[suite]
	if !ok {
		row = map[string]cell{}
		m.cells[suite] = row
		m.suites = append(m.suites, suite)
	}
	row[target] = merge(row[target], c)
}

func (m *matrix) handle(e event) {
	id := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		if len(m.output[id]) < 10000 {
			m.output[id] = append(m.output[id], e.Output)
		}
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	if e.Test == "" { // package result
		switch e.Action {
		case "fail":
			m.failed = true
			for _, line := range m.output[id] {
				fmt.Fprint(m.out, line)
			}
			fmt.Fprintf(m.out, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
		case "pass":
			fmt.Fprintf(m.out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		case "skip":
			fmt.Fprintf(m.out, "?   \t%s\t[no test files]\n", e.Package)
		}
		delete(m.output, id)
		return
	}
	if e.Action == "fail" {
		m.failed = true
		for _, line := range m.output[id] {
			fmt.Fprint(m.out, line)
		}
	}
	delete(m.output, id)
	parts := strings.SplitN(e.Test, "/", 3)
	if len(parts) < 2 || !m.known[parts[1]] {
		return
	}
	c := map[string]cell{"pass": passed, "fail": failed, "skip": skipped}[e.Action]
	m.record(m.suite(e.Package), parts[1], c)
}

func (m *matrix) table(title string) string {
	var b strings.Builder
	sort.Strings(m.suites)
	fmt.Fprintf(&b, "server matrix (%s): suite x server\n", title)
	fmt.Fprintf(&b, "  %-14s", "suite")
	for _, t := range m.targets {
		fmt.Fprintf(&b, " %-15s", t)
	}
	b.WriteString("\n")
	for _, s := range m.suites {
		fmt.Fprintf(&b, "  %-14s", s)
		for _, t := range m.targets {
			fmt.Fprintf(&b, " %-15s", m.cells[s][t])
		}
		b.WriteString("\n")
	}
	if len(m.suites) == 0 {
		b.WriteString("  (no matrix suites ran)\n")
	}
	return b.String()
}

func run(in io.Reader, out io.Writer, targets []string, title, tableFile string) int {
	m := newMatrix(targets, out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not test2json (a build error printed by go test itself): pass it through.
			fmt.Fprintln(out, string(line))
			if len(line) > 0 {
				m.failed = m.failed || strings.Contains(string(line), "FAIL")
			}
			continue
		}
		m.handle(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testmatrix: reading input:", err)
		return 1
	}
	tbl := m.table(title)
	fmt.Fprint(out, "\n"+tbl)
	if tableFile != "" {
		f, err := os.OpenFile(tableFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.WriteString(tbl)
			err = errorsJoin(err, f.Close())
		}
		if err != nil {
			fmt.Fprintln(out, "testmatrix:", err)
			return 1
		}
	}
	if m.failed {
		return 1
	}
	return 0
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func main() {
	targets := flag.String("targets", "redis70,redis8,valkey8,valkey9,redis-cluster,valkey-cluster", "comma-separated target names, the table's columns")
	title := flag.String("title", "go test", "title printed above the table")
	tableFile := flag.String("append-table", "", "also append the table to this file")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, strings.Split(*targets, ","), *title, *tableFile))
}
