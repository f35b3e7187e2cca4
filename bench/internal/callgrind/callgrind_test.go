package callgrind

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// sample is a callgrind dump as callgrind 3.19 writes it (trimmed): name compression, relative
// positions, a call's inclusive cost line after calls=, which is not the caller's own.
const sample = `# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 16163
cmd:  ./p 0
part: 1

desc: Trigger: Client Request: dump

positions: line
events: Ir
summary: 41000

ob=(1) /tmp/p
fl=(31) /usr/local/go/src/runtime/mheap.go
fn=(324) runtime.(*mheap).initSpan
1439 10
+10 14
-7 10
cfn=(326) github.com/redis/rueidis.(*pipe).Do
calls=2 1821
* 44
+3 8
fn=(326)
1821 100
cfn=(327) main.f
calls=1 12
+1 900
fn=(327)
12 5
* 1

totals: 29154
`

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		total int64
		self  map[string]int64 // nil: not checked
		calls map[string]int64 // nil: not checked
		err   string           // "": no error
	}{
		{name: "callgrind 3.19 dump", in: sample, total: 29154,
			self:  map[string]int64{"runtime.(*mheap).initSpan": 42, "github.com/redis/rueidis.(*pipe).Do": 100, "main.f": 6},
			calls: map[string]int64{"github.com/redis/rueidis.(*pipe).Do": 44, "main.f": 900}},
		{name: "calls without cfn", in: "events: Ir\nfn=(1) a.b\ncalls=1 2\n1 4\ntotals: 4\n", err: "without cfn"},
		{name: "summary only", in: "events: Ir\nsummary: 77\n", total: 77, self: map[string]int64{}},
		{name: "totals wins over summary", in: "events: Ir\nsummary: 77\ntotals: 70\n", total: 70},
		{name: "no events line: the first column", in: "summary: 5 6\n", total: 5},
		{name: "Ir not first, two positions", in: "positions: instr line\nevents: Dr Ir\nfn=(1) a.b\n0x10 3 7 11\n+2 * 1 2\ntotals: 9 13\n",
			total: 13, self: map[string]int64{"a.b": 13}},
		{name: "missing trailing event is zero", in: "events: Ir Dr\nfn=(1) a.b\n3\n4 2 5\ntotals: 2 5\n", total: 2, self: map[string]int64{"a.b": 2}},
		{name: "uncompressed names", in: "events: Ir\nfn=a.b\n1 4\nfn=c.d\n1 5\ntotals: 9\n", total: 9, self: map[string]int64{"a.b": 4, "c.d": 5}},
		{name: "no total", in: "events: Ir\nfn=(1) a.b\n1 4\n", err: "no summary"},
		{name: "no Ir event", in: "events: Dr\ntotals: 1\n", err: "no Ir event"},
		{name: "bad total", in: "events: Ir\ntotals: x\n", err: "bad count"},
		{name: "negative total", in: "events: Ir\ntotals: -3\n", err: "bad count"},
		{name: "empty total", in: "events: Ir\ntotals:\n", err: "no Ir count"},
		{name: "bad cost", in: "events: Ir\nfn=(1) a.b\n1 x\ntotals: 1\n", err: "bad cost line"},
		{name: "cost outside a function", in: "events: Ir\n1 4\ntotals: 4\n", err: "outside a function"},
		{name: "undefined name", in: "events: Ir\nfn=(9)\n1 4\ntotals: 4\n", err: "undefined name"},
		{name: "empty", in: "", err: "no summary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Total != tc.total {
				t.Errorf("total %d, want %d", p.Total, tc.total)
			}
			if tc.self != nil && fmt.Sprint(p.Self) != fmt.Sprint(tc.self) {
				t.Errorf("self %v, want %v", p.Self, tc.self)
			}
			if tc.calls != nil && fmt.Sprint(p.Calls) != fmt.Sprint(tc.calls) {
				t.Errorf("calls %v, want %v", p.Calls, tc.calls)
			}
		})
	}
}

func TestGoCode(t *testing.T) {
	for fn, want := range map[string]bool{
		"github.com/redis/rueidis.(*pipe).Do":             true,
		"github.com/coordkit/coordkit/lock.(*Locker).Try": true,
		"bufio.(*Writer).WriteString":                     true,
		"crypto/rand.Read":                                true,
		"runtime.mallocgc":                                false,
		"runtime/cgo(.text)":                              false,
		"internal/runtime/maps.(*Map).getWithKey":         false,
		"internal/poll.(*FD).Read":                        false,
		"syscall.Syscall6":                                false,
		"sync.(*Mutex).lockSlow":                          false,
		"threadentry":                                     false,
		"0x0000000000401000":                              false,
	} {
		if got := GoCode(fn); got != want {
			t.Errorf("GoCode(%q) = %v, want %v", fn, got, want)
		}
	}
	p := Profile{Self: map[string]int64{"a.b": 3, "runtime.x": 5, "c.d": 7}}
	if got := p.Sum(GoCode); got != 10 {
		t.Errorf("Sum = %d, want 10", got)
	}
}

// FuzzParse checks that Parse never panics and that what it accepts is consistent.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("events: Ir\nfn=(1) a.b\n1 4\ntotals: 4\n")
	f.Add("positions: instr line\nevents: Dr Ir\nfn=(1) a.b\n0x10 3 7 11\ncalls=1 2\n+2 * 1 2\ntotals: 9 13\n")
	f.Fuzz(func(t *testing.T, in string) {
		p, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		if p.Total < 0 {
			t.Errorf("negative total %d", p.Total)
		}
		for fn, n := range p.Self {
			if n < 0 {
				t.Errorf("negative count %d of %q", n, fn)
			}
		}
		for fn, n := range p.Calls {
			if n < 0 {
				t.Errorf("negative call count %d of %q", n, fn)
			}
		}
	})
}

// The real run: this test binary runs itself under callgrind (selected by childEnv) and does
// given iterations of spin on another, locked thread inside each window: the window's count must
// grow with the iterations (the other thread counted) and, when the test binary has a symbol
// table (go test -ldflags=-s=false), the dump must hold spin's own instructions.
const childEnv = "CALLGRIND_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		var iters []int
		if err := json.Unmarshal([]byte(v), &iters); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, n := range iters {
			done := make(chan int)
			WindowStart()
			go func() {
				runtime.LockOSThread() // another thread than the one that opened the window
				done <- spin(n)
			}()
			sink += <-done
			WindowEnd()
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var sink int

//go:noinline
func spin(n int) int {
	x := 0
	for i := range n {
		x += strconv.IntSize * i
	}
	return x
}

func TestRealRun(t *testing.T) {
	if !Supported {
		t.Skipf("client requests are written for amd64 only (%s)", runtime.GOARCH)
	}
	vg, err := Valgrind()
	if err != nil {
		// make setup installs valgrind; in CI a missing one is a failure
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "callgrind.out")
	iters := []int{0, 100_000, 200_000}
	job, _ := json.Marshal(iters)
	cmd := Command(t.Context(), vg, out, exe, []string{"-test.run=^$"}, childEnv+"="+string(job))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s\n%s", err, b, Log(out, 2000))
	}
	var totals, spins []int64
	for i := range iters {
		p, err := ParseFile(DumpPath(out, i+1))
		if err != nil {
			t.Fatal(err)
		}
		var s int64
		for fn, n := range p.Self {
			if strings.HasSuffix(fn, "callgrind.spin") {
				s += n
			}
		}
		totals, spins = append(totals, p.Total), append(spins, s)
	}
	t.Logf("totals %v, spin %v", totals, spins)
	for i := 1; i < len(iters); i++ { // the other thread counted: at least one instruction per iteration
		if d := totals[i] - totals[i-1]; d < int64(iters[i]-iters[i-1]) {
			t.Errorf("totals %v: window %d has %d instructions more than window %d, want at least %d", totals, i, d, i-1, iters[i]-iters[i-1])
		}
	}
	if !HasSymbols(exe) {
		t.Logf("%s has no symbol table (go test -ldflags=-s=false keeps it): function names not checked", exe)
		return
	}
	if spins[0] > 100 || spins[1] < 100_000 || spins[2] < 2*spins[1]-1000 || spins[2] > 2*spins[1]+1000 {
		t.Errorf("spin's own instructions %v: want a few, then at least one per iteration, then twice that", spins)
	}
	if totals[1] < spins[1] || totals[2] < spins[2] { // spin ran on another thread than the window's
		t.Errorf("totals %v do not hold spin's instructions %v", totals, spins)
	}
	if _, err := os.Stat(DumpPath(out, len(iters)+1)); err == nil {
		t.Errorf("more dumps than windows")
	}
}

func TestWindowsOutsideValgrind(t *testing.T) {
	WindowStart() // a client request outside valgrind does nothing
	WindowEnd()
}
