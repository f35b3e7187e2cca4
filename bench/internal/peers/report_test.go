package peers

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	got, err := ParseCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250001\r\nused_cpu_sys_children:9.0\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != 1_750_001 {
		t.Errorf("ParseCPU = %d µs, want 1750001", got)
	}
	for _, bad := range []string{"", "used_cpu_sys:1.0", "used_cpu_user:1.0", "used_cpu_sys:x\nused_cpu_user:1", "used_cpu_sys:-1\nused_cpu_user:1", "used_cpu_sys:NaN\nused_cpu_user:1"} {
		if _, err := ParseCPU(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v, want ErrMalformed", bad, err)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct{ a, b, want float64 }{{3, 2, 1.5}, {1, 0, 0}, {0, 1, 0}, {-1, 2, 0}, {2, -1, 0}} {
		if got := Ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	in := slices.Clone(ds)
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0.11, 2}, {1, 10}, {0, 1}} {
		if got := Quantile(ds, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if !slices.Equal(in, ds) {
		t.Error("Quantile changed its input")
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile(nil) not 0")
	}
}

func TestSummarizeAndRatios(t *testing.T) {
	sample := func(ops int64, calls, usec, cpu int64) Sample {
		return Sample{Ops: ops, Elapsed: time.Second, Server: Stat{Calls: calls, Usec: usec}, CPUUsec: cpu}
	}
	// Three rounds: medians 200 ops/s, 6 commands, 3 µs and 10 µs per op.
	a := Summarize("a", "", 8, []Sample{sample(100, 600, 300, 1000), sample(300, 1800, 900, 3000), sample(200, 1200, 600, 2000)})
	if a.OpsPerSec != 200 || a.CommandsPerOp != 6 || a.CmdstatUsecPerOp != 3 || a.CPUUsecPerOp != 10 || !slices.Equal(a.Rounds, []float64{100, 300, 200}) {
		t.Fatalf("Summarize = %+v", a)
	}
	rows := []Throughput{
		a,
		{Contender: "ceil", Callers: 8, OpsPerSec: 400},
		{Contender: "peer", Callers: 8, OpsPerSec: 100},
		{Contender: "a", Callers: 1, OpsPerSec: 50},
		{Contender: "ceil", Callers: 1, OpsPerSec: 100},
		{Contender: "a", Keys: "hot", Callers: 8, OpsPerSec: 10}, // no ceiling of its key pattern
	}
	SetRatios(rows, "ceil", "peer")
	for i, want := range [][2]float64{{0.5, 2}, {1, 4}, {0.25, 1}, {0.5, 0}, {1, 0}, {0, 0}} {
		if rows[i].VsCeiling != want[0] || rows[i].VsPeer != want[1] {
			t.Errorf("row %d (%s/%s/%d): vs ceiling %v, vs peer %v; want %v", i, rows[i].Contender, rows[i].Keys, rows[i].Callers, rows[i].VsCeiling, rows[i].VsPeer, want)
		}
	}
	if (Sample{}).Rate() != 0 || (Sample{}).PerOp(5) != 0 {
		t.Error("empty sample: want 0 rate and 0 per op")
	}
}

func TestSetHandoffRatios(t *testing.T) {
	rows := []Handoff{{Contender: "a", P50Ms: 0.3}, {Contender: "peer", P50Ms: 0.6}, {Contender: "raw", P50Ms: 0.1}}
	SetHandoffRatios(rows, "raw", "peer")
	if r := rows[0]; r.P50VsPeer != 0.5 || r.P50VsCeiling < 2.99 || r.P50VsCeiling > 3.01 {
		t.Errorf("a: %+v", r)
	}
	if r := rows[1]; r.P50VsPeer != 1 {
		t.Errorf("peer: %+v", r)
	}
}

// TestReportJSON pins the JSON field names that readers of -json output rely on.
func TestReportJSON(t *testing.T) {
	rep := Report{
		Date:       "2026-12-02T00:00:00Z",
		Server:     ServerInfo{Target: "redis8", Flavor: "redis", Version: "8.0.6", Backend: "process"},
		Machine:    Machine{GOOS: "linux", GOARCH: "amd64", NumCPU: 2, GOMAXPROCS: 2, Go: "go1.26"},
		Settings:   Settings{Rounds: 3, Duration: "500ms", Callers: []int{1, 8}, Handoffs: 30, Sections: []string{"lock"}},
		Lock:       []Throughput{{Contender: "coordkit", Callers: 1, OpsPerSec: 1, Rounds: []float64{1}}},
		LockAllocs: []Allocs{{Contender: "coordkit", PerOp: 9, Ops: 10}},
		Handoff:    []Handoff{{Contender: "coordkit", Count: 1}},
		GCRA:       []Throughput{{Contender: "coordkit", Keys: "hot", Callers: 1}},
		GCRAAllocs: []Allocs{{Contender: "coordkit"}},
		Fair:       &Fair{},
		Cluster:    &Cluster{Contender: "coordkit", Primaries: 3, Rows: []Throughput{{Contender: "coordkit", Keys: "1-primary"}}},
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"":            {"date", "server", "machine", "settings", "lock", "lock_allocs", "handoff", "gcra", "gcra_allocs", "fair", "cluster"},
		"server":      {"target", "flavor", "version", "backend"},
		"machine":     {"goos", "goarch", "num_cpu", "gomaxprocs", "go"},
		"settings":    {"rounds", "duration_per_round", "callers", "handoffs_per_round", "sections"},
		"lock":        {"contender", "callers", "ops_per_sec", "rounds_ops_per_sec", "vs_ceiling", "vs_peer", "server_commands_per_op", "server_cmdstat_usec_per_op", "server_cpu_usec_per_op"},
		"lock_allocs": {"contender", "allocs_per_op", "ops"},
		"handoff":     {"contender", "handoffs", "stalls", "p50_ms", "p99_ms", "p50_vs_peer", "p50_vs_ceiling", "server_commands_per_handoff"},
		"gcra":        {"contender", "keys", "callers", "ops_per_sec"},
		"cluster":     {"contender", "primaries", "version", "rows", "measured_scale"},
		"fair":        {"fifo", "killed_waiter", "section_seconds"},
	}
	for section, keys := range want {
		obj := m
		if section != "" {
			switch v := m[section].(type) {
			case map[string]any:
				obj = v
			case []any:
				obj = v[0].(map[string]any)
			default:
				t.Fatalf("%s: %T", section, m[section])
			}
		}
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Errorf("%s: no field %q in %v", section, k, obj)
			}
		}
	}
	// Sections not run are left out.
	b, _ = json.Marshal(Report{Lock: rep.Lock})
	if strings.Contains(string(b), `"handoff"`) || strings.Contains(string(b), `"cluster"`) || strings.Contains(string(b), `"fair"`) {
		t.Errorf("empty sections present: %s", b)
	}
}

func TestWriteTables(t *testing.T) {
	var buf bytes.Buffer
	rows := []Throughput{{Contender: "coordkit", Callers: 8, OpsPerSec: 1234.4, VsCeiling: 0.955, CommandsPerOp: 9}}
	if err := WriteThroughput(&buf, "Lock", "cycles/s", "raw", "peer", rows); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"Lock\n", "vs raw", "vs peer", "coordkit", "1234", "0.95", "9.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The missing peer ratio prints as "-".
	if fields := strings.Fields(strings.Split(out, "\n")[2]); fields[5] != "-" {
		t.Errorf("vs peer = %q, want -:\n%s", fields[5], out)
	}
	buf.Reset()
	if err := WriteHandoff(&buf, "H", "raw", "peer", []Handoff{{Contender: "x", Count: 3, P50Ms: 0.5, P99Ms: 1.25, P50VsPeer: 0.8}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "0.500") || !strings.Contains(out, "1.250") || !strings.Contains(out, "0.80") {
		t.Errorf("hand-off table:\n%s", out)
	}
	buf.Reset()
	if err := WriteAllocs(&buf, "A", []Allocs{{Contender: "x", PerOp: 2.25, Ops: 7}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "2.2") || !strings.Contains(out, " 7") {
		t.Errorf("allocs table:\n%s", out)
	}
}
