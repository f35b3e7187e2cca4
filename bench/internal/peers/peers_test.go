package peers

import (
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := slices.Clone(tc.in)
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median changed its input")
		}
	}
}

func TestRotate(t *testing.T) {
	names := []string{"a", "b", "c"}
	for _, tc := range []struct {
		r    int
		want []string
	}{{0, []string{"a", "b", "c"}}, {1, []string{"b", "c", "a"}}, {2, []string{"c", "a", "b"}}, {3, []string{"a", "b", "c"}}, {-1, []string{"c", "a", "b"}}} {
		if got := Rotate(names, tc.r); !slices.Equal(got, tc.want) {
			t.Errorf("Rotate(%d) = %v, want %v", tc.r, got, tc.want)
		}
	}
	if Rotate(nil, 1) != nil {
		t.Error("Rotate(nil) not nil")
	}
}

func TestParseCommandstats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_set:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\ncmdstat_config|get:calls=1,usec=3,usec_per_call=3.00\r\ncmdstat_EVALSHA:calls=2,usec=40\r\n\r\n"
	got, err := ParseCommandstats(info)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Stat{"set": {5, 10}, "config|get": {1, 3}, "evalsha": {2, 40}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, bad := range []string{"cmdstat_set:calls=x,usec=1", "cmdstat_set:usec=1", "cmdstat_:calls=1,usec=1", "cmdstat_set", "cmdstat_set:calls=-1,usec=1"} {
		if _, err := ParseCommandstats(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err %v, want ErrMalformed", bad, err)
		}
	}
}

func TestDelta(t *testing.T) {
	b := map[string]Stat{"set": {1, 1}, "info": {1, 1}}
	a := map[string]Stat{"set": {4, 7}, "get": {2, 2}, "info": {9, 9}}
	if got := Delta(b, a, "info"); got != (Stat{5, 8}) {
		t.Errorf("Delta = %v", got)
	}
}

func FuzzParseCommandstats(f *testing.F) {
	f.Add("cmdstat_set:calls=5,usec=10,usec_per_call=2.00\r\n")
	f.Add("# Commandstats\ncmdstat_a|b:calls=0,usec=0\n")
	f.Add("cmdstat_x:calls=1")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseCommandstats(s)
		if err != nil {
			if m != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err %v with map %v", err, m)
			}
			return
		}
		for k, v := range m {
			if k == "" || v.Calls < 0 || v.Usec < 0 {
				t.Fatalf("bad entry %q %v", k, v)
			}
		}
	})
}

func TestWork(t *testing.T) {
	b := map[string]Stat{"evalsha": {1, 10}, "get": {1, 1}}
	// Two scripts (usec 50, including their GETs' 4) and a top-level SET: calls count everything,
	// usec only the scripts.
	a := map[string]Stat{"evalsha": {3, 60}, "get": {3, 5}, "set": {1, 2}, "info": {5, 5}}
	if got := Work(b, a, "info"); got != (Stat{Calls: 5, Usec: 50}) {
		t.Errorf("Work with scripts = %v, want {5 50}", got)
	}
	// No script: every command's usec.
	a = map[string]Stat{"evalsha": {1, 10}, "get": {4, 7}, "set": {1, 2}}
	if got := Work(b, a); got != (Stat{Calls: 4, Usec: 8}) {
		t.Errorf("Work without scripts = %v, want {4 8}", got)
	}
}
