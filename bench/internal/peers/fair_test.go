package peers

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCountFIFO(t *testing.T) {
	for _, tc := range []struct {
		name         string
		order        []int
		tokens       []int64
		first        int64
		waiters      int
		wantOrder    int
		wantTokens   int
		wantViolated bool
	}{
		{"in order", []int{0, 1, 2}, []int64{11, 12, 13}, 10, 3, 0, 0, false},
		{"gaps in tokens are fine", []int{0, 1, 2}, []int64{11, 15, 16}, 10, 3, 0, 0, false},
		{"two swapped", []int{0, 2, 1}, []int64{11, 12, 13}, 10, 3, 2, 0, true},
		{"one missing", []int{0, 1}, []int64{11, 12}, 10, 3, 1, 0, true},
		{"missing in the middle", []int{0, 2}, []int64{11, 12}, 10, 3, 2, 0, true},
		{"token repeated", []int{0, 1, 2}, []int64{11, 11, 12}, 10, 3, 0, 1, true},
		{"token not above the holder's", []int{0, 1}, []int64{10, 12}, 10, 2, 0, 1, true},
		{"token going down", []int{0, 1, 2}, []int64{11, 13, 12}, 10, 3, 0, 1, true},
		{"none", nil, nil, 10, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, k := CountFIFO(tc.order, tc.tokens, tc.first, tc.waiters)
			if o != tc.wantOrder || k != tc.wantTokens {
				t.Errorf("CountFIFO = %d order, %d token violations; want %d, %d", o, k, tc.wantOrder, tc.wantTokens)
			}
			f := Fair{FIFO: FairFIFO{OrderViolations: o, TokenViolations: k}}
			if (f.Violations() > 0) != tc.wantViolated {
				t.Errorf("Violations = %d, want violated %v", f.Violations(), tc.wantViolated)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	s := DelaySpreadOf([]time.Duration{3 * time.Millisecond, time.Millisecond, 2500 * time.Microsecond, 10 * time.Millisecond})
	if s.MinMs != 1 || s.MaxMs != 10 || s.MedianMs != 2.75 || !slices.Equal(s.Ms, []float64{3, 1, 2.5, 10}) {
		t.Errorf("DelaySpreadOf = %+v", s)
	}
	if z := DelaySpreadOf(nil); z.MinMs != 0 || z.MaxMs != 0 || z.MedianMs != 0 || len(z.Ms) != 0 {
		t.Errorf("DelaySpreadOf(nil) = %+v", z)
	}
}

// TestFairJSON pins the fair section's JSON field names.
func TestFairJSON(t *testing.T) {
	b, err := json.Marshal(Fair{Killed: FairKilled{InSlice: DelaySpreadOf([]time.Duration{time.Millisecond})}})
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]any{}
	for _, k := range []string{"fifo", "killed_waiter", "section_seconds"} {
		if _, ok := top[k]; !ok {
			t.Errorf("no field %q in %v", k, top)
		}
		m[k], _ = top[k].(map[string]any)
	}
	for section, keys := range map[string][]string{
		"fifo": {"rounds", "waiters_per_round", "clients", "load_callers", "load_cycles", "grants", "order_violations",
			"token_violations", "handoff_p50_ms", "handoff_p99_ms"},
		"killed_waiter": {"slice_ms", "dead_ttl_ms", "killed_in_slice", "killed_after_slice"},
	} {
		for _, k := range keys {
			if _, ok := m[section][k]; !ok {
				t.Errorf("%s: no field %q in %v", section, k, m[section])
			}
		}
	}
	in, _ := m["killed_waiter"]["killed_in_slice"].(map[string]any)
	for _, k := range []string{"min_ms", "median_ms", "max_ms", "ms", "dead_grants", "held_to_ttl"} {
		if _, ok := in[k]; !ok {
			t.Errorf("killed_in_slice: no field %q in %v", k, in)
		}
	}
}

func TestWriteFair(t *testing.T) {
	var buf bytes.Buffer
	f := &Fair{
		FIFO: FairFIFO{Rounds: 2, Waiters: 64, Clients: 8, LoadCallers: 8, LoadCycles: 999, Grants: 127, OrderViolations: 1,
			TokenViolations: 0, P50Ms: 0.25, P99Ms: 1.5},
		Killed: FairKilled{SliceMs: 200, DeadTTLMs: 2000,
			InSlice:    DelaySpread{MinMs: 150, MedianMs: 175.25, MaxMs: 199, Ms: []float64{150, 175.25, 199}, DeadGrants: 3, HeldToTTL: 1, SliceLeftMs: []float64{190, 150}},
			AfterSlice: DelaySpread{MinMs: 0.3, MedianMs: 0.4, MaxMs: 0.5, Ms: []float64{0.3, 0.4, 0.5}}},
		Seconds: 7.25,
	}
	if err := WriteFair(&buf, f); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	if fields := strings.Fields(lines[2]); !slices.Equal(fields, []string{"128", "127", "1", "0", "0.250", "1.500"}) {
		t.Errorf("FIFO row %q:\n%s", fields, out)
	}
	if fields := strings.Fields(lines[6]); !slices.Equal(fields, []string{"within", "its", "slice", "3", "3", "1", "150.0", "175.2", "199.0"}) {
		t.Errorf("in-slice row %q:\n%s", fields, out)
	}
	if fields := strings.Fields(lines[7]); !slices.Equal(fields, []string{"after", "its", "slice", "3", "0", "0", "0.3", "0.4", "0.5"}) {
		t.Errorf("after-slice row %q:\n%s", fields, out)
	}
	for _, want := range []string{"2 rounds, 64 waiters each over 8 clients, 8 background lock-cycle callers (999 cycles)", "slice 200 ms", "TTL 2000 ms",
		"fair section: 7.2 s", "each repetition: delay ms (slice left at the release, ms): 150.0 (190) 175.2 (150) 199.0 (0)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
