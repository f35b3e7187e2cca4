package peers

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ParseCPU returns used_cpu_sys + used_cpu_user of an INFO cpu reply in microseconds (the server
// process's CPU time), or ErrMalformed when either field is missing or not a number.
func ParseCPU(info string) (int64, error) {
	var sys, user float64
	var haveSys, haveUser bool
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, ErrMalformed
		}
		if k == "used_cpu_sys" {
			sys, haveSys = f, true
		} else {
			user, haveUser = f, true
		}
	}
	if !haveSys || !haveUser {
		return 0, ErrMalformed
	}
	return int64(math.Round((sys + user) * 1e6)), nil
}

// Ratio returns a/b, or 0 when either is not positive (no figure to compare: printed as "-").
func Ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// Quantile returns the q-quantile (0 < q <= 1) of ds by the nearest-rank method: the smallest value
// with at least q of the values at or below it; 0 for none. ds is unchanged.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Sample is one measurement: ops operations in Elapsed, and the server's work meanwhile.
type Sample struct {
	Ops     int64
	Elapsed time.Duration
	Server  Stat  // commandstats work (Work: calls incl. commands run inside scripts; usec counted once)
	CPUUsec int64 // INFO cpu delta (server process, user + sys)
}

// Rate returns ops per second of s (0 for no time).
func (s Sample) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// PerOp returns x per operation of s (0 for no operation).
func (s Sample) PerOp(x int64) float64 {
	if s.Ops <= 0 {
		return 0
	}
	return float64(x) / float64(s.Ops)
}

// Throughput is one row of a throughput table: a contender at a caller count (and key pattern),
// medians over the rounds, and its ratios to the ceiling and to the reference peer of the same run.
type Throughput struct {
	Contender string    `json:"contender"`
	Keys      string    `json:"keys,omitempty"` // GCRA: "hot" or "spread"
	Callers   int       `json:"callers"`
	OpsPerSec float64   `json:"ops_per_sec"` // median over rounds
	Rounds    []float64 `json:"rounds_ops_per_sec"`
	VsCeiling float64   `json:"vs_ceiling"` // OpsPerSec / the ceiling row's (0: none)
	VsPeer    float64   `json:"vs_peer"`    // OpsPerSec / the reference peer row's (0: none)
	// CommandsPerOp is server commands per operation (INFO commandstats calls, commands inside
	// scripts included), median over rounds.
	CommandsPerOp float64 `json:"server_commands_per_op"`
	// CmdstatUsecPerOp is the commandstats usec per operation: the command execution time the server
	// reports, a script's commands counted once (see Work).
	CmdstatUsecPerOp float64 `json:"server_cmdstat_usec_per_op"`
	// CPUUsecPerOp is the server process's CPU time (INFO cpu, user + sys) per operation: command
	// execution plus network I/O and event-loop work.
	CPUUsecPerOp float64 `json:"server_cpu_usec_per_op"`
}

// Summarize returns the Throughput row of contender from its samples (one per round).
func Summarize(contender, keys string, callers int, samples []Sample) Throughput {
	t := Throughput{Contender: contender, Keys: keys, Callers: callers}
	var cmds, usec, cpu []float64
	for _, s := range samples {
		t.Rounds = append(t.Rounds, s.Rate())
		cmds = append(cmds, s.PerOp(s.Server.Calls))
		usec = append(usec, s.PerOp(s.Server.Usec))
		cpu = append(cpu, s.PerOp(s.CPUUsec))
	}
	t.OpsPerSec, t.CommandsPerOp, t.CmdstatUsecPerOp, t.CPUUsecPerOp = Median(t.Rounds), Median(cmds), Median(usec), Median(cpu)
	return t
}

// SetRatios fills VsCeiling and VsPeer of every row from the rows named ceiling and peer with the
// same Keys and Callers.
func SetRatios(rows []Throughput, ceiling, peer string) {
	find := func(name string, r Throughput) float64 {
		for _, o := range rows {
			if o.Contender == name && o.Keys == r.Keys && o.Callers == r.Callers {
				return o.OpsPerSec
			}
		}
		return 0
	}
	for i, r := range rows {
		rows[i].VsCeiling = Ratio(r.OpsPerSec, find(ceiling, r))
		rows[i].VsPeer = Ratio(r.OpsPerSec, find(peer, r))
	}
}

// Allocs is a contender's client allocations per operation (runtime.MemStats.Mallocs delta over a
// single-goroutine phase, divided by its operations).
type Allocs struct {
	Contender string  `json:"contender"`
	PerOp     float64 `json:"allocs_per_op"`
	Ops       int     `json:"ops"`
}

// Instructions is a contender's client instructions per operation, counted by callgrind over a
// single-goroutine phase (every thread of the client process: the caller and the client's reader
// and writer goroutines), less the runner's own part; with the server figures of the contender's
// throughput row at the smallest caller count beside it.
type Instructions struct {
	Contender string `json:"contender"`
	// PerOp is the median over Reps of the client instructions per operation.
	PerOp float64 `json:"client_instructions_per_op"`
	// Reps is the instructions per operation of each repetition (each its own window of Ops
	// operations in one process).
	Reps []float64 `json:"reps_client_instructions_per_op"`
	// CodePerOp and CodeReps are the same for the instructions of Go code outside the runtime,
	// the network poller, system calls and sync (the libraries' and the standard library's own
	// code; the runtime's share, scheduling and waiting included, depends on timing): median and
	// each repetition. Zero and absent when the executable had no symbol table.
	CodePerOp float64   `json:"client_code_instructions_per_op,omitempty"`
	CodeReps  []float64 `json:"reps_client_code_instructions_per_op,omitempty"`
	Ops       int       `json:"ops"`
	// Callers is the caller count of the throughput row whose server figures follow (0: none).
	Callers int `json:"server_figures_callers"`
	// CommandsPerOp, CmdstatUsecPerOp and CPUUsecPerOp are that row's (see Throughput).
	CommandsPerOp    float64 `json:"server_commands_per_op"`
	CmdstatUsecPerOp float64 `json:"server_cmdstat_usec_per_op"`
	CPUUsecPerOp     float64 `json:"server_cpu_usec_per_op"`
}

// Spread returns (max - min) / median of reps (0 for fewer than two, or a zero median).
func Spread(reps []float64) float64 {
	m := Median(reps)
	if len(reps) < 2 || m == 0 {
		return 0
	}
	return (slices.Max(reps) - slices.Min(reps)) / m
}

// Handoff is one hand-off row: the latency from the holder's release call to the waiting
// acquisition returning, over every hand-off of every round.
type Handoff struct {
	Contender string `json:"contender"`
	Count     int    `json:"handoffs"` // hand-offs whose waiter acquired (the latencies)
	// Stalls is the hand-offs whose waiter was not woken within the runner's stall limit after the
	// release (a lost wake-up; not in the latencies).
	Stalls int     `json:"stalls"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	// P50VsPeer is P50Ms / the reference peer's (lower is better; 0: none).
	P50VsPeer float64 `json:"p50_vs_peer"`
	// P50VsCeiling is P50Ms / the floor row's.
	P50VsCeiling float64 `json:"p50_vs_ceiling"`
	// CommandsPerHandoff is the server commands of a whole hand-off (holder's acquisition, the
	// waiter's attempts, the release, the waiter's acquisition and release) per hand-off, median
	// over rounds.
	CommandsPerHandoff float64 `json:"server_commands_per_handoff"`
}

// SetHandoffRatios fills P50VsPeer and P50VsCeiling of every row.
func SetHandoffRatios(rows []Handoff, ceiling, peer string) {
	find := func(name string) float64 {
		for _, o := range rows {
			if o.Contender == name {
				return o.P50Ms
			}
		}
		return 0
	}
	for i, r := range rows {
		rows[i].P50VsPeer = Ratio(r.P50Ms, find(peer))
		rows[i].P50VsCeiling = Ratio(r.P50Ms, find(ceiling))
	}
}

// Cluster is the result of the cluster section: the same contender at the same callers with keys on
// one primary and with keys spread over all primaries of one cluster.
type Cluster struct {
	Contender     string       `json:"contender"`
	Primaries     int          `json:"primaries"`
	Version       string       `json:"version"`
	Rows          []Throughput `json:"rows"` // Keys "1-primary" and "all-primaries"
	MeasuredScale float64      `json:"measured_scale"`
}

// Report is the runner's JSON output.
type Report struct {
	Date       string       `json:"date"`
	Server     ServerInfo   `json:"server"`
	Machine    Machine      `json:"machine"`
	Settings   Settings     `json:"settings"`
	Lock       []Throughput `json:"lock,omitempty"`
	LockAllocs []Allocs     `json:"lock_allocs,omitempty"`
	// Conditional and ConditionalAllocs are the conditional section's: Coordkit's lock cycles with
	// the scripts only and with the conditional commands.
	Conditional       []Throughput `json:"conditional,omitempty"`
	ConditionalAllocs []Allocs     `json:"conditional_allocs,omitempty"`
	Handoff           []Handoff    `json:"handoff,omitempty"`
	GCRA              []Throughput `json:"gcra,omitempty"`
	GCRAAllocs        []Allocs     `json:"gcra_allocs,omitempty"`
	// LockInstructions and GCRAInstructions are the client instructions per operation (absent when
	// the instruction phase did not run: -instructions=false, or no valgrind).
	LockInstructions []Instructions `json:"lock_instructions,omitempty"`
	GCRAInstructions []Instructions `json:"gcra_instructions,omitempty"`
	Fair             *Fair          `json:"fair,omitempty"`
	Cluster          *Cluster       `json:"cluster,omitempty"`
	Ack              *Ack           `json:"ack,omitempty"`
}

// Ack is the ack section's result: Coordkit's lock cycle on a primary with one replica, without the
// replica acknowledgement (Keys "off") and with WAIT 1 (Keys "WAIT 1"), one caller.
type Ack struct {
	Version string   `json:"version"`
	Rows    []AckRow `json:"rows"`
	// P50Ratio is the WAIT 1 row's p50 over the off row's.
	P50Ratio float64 `json:"p50_ratio"`
}

// AckRow is one row of [Ack]: the throughput figures, and the p50 and p99 of single cycles (medians
// over the rounds).
type AckRow struct {
	Throughput
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
}

// ServerInfo names the server of a run.
type ServerInfo struct {
	Target  string `json:"target"`
	Flavor  string `json:"flavor"`
	Version string `json:"version"`
	Backend string `json:"backend"`
}

// Machine describes the client machine.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
}

// Settings are the run's flags.
type Settings struct {
	Rounds   int      `json:"rounds"`
	Duration string   `json:"duration_per_round"`
	Callers  []int    `json:"callers"`
	Handoffs int      `json:"handoffs_per_round"`
	Sections []string `json:"sections"`
}

// fmtRatio prints a ratio with two decimals, or "-" for none.
func fmtRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// fmtNum prints x with the given decimals.
func fmtNum(x float64, decimals int) string { return strconv.FormatFloat(x, 'f', decimals, 64) }

// WriteThroughput prints rows as a table: ops/s, the ratios to ceiling and peer, commands, server
// usec and CPU per op. unit names the operation ("cycles/s", "decisions/s").
func WriteThroughput(w io.Writer, title, unit, ceiling, peer string, rows []Throughput) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\n", title)
	fmt.Fprintf(tw, "contender\tkeys\tcallers\t%s\tvs %s\tvs %s\tcmds/op\tcmdstat µs/op\tcpu µs/op\t\n", unit, ceiling, peer)
	for _, r := range rows {
		keys := r.Keys
		if keys == "" {
			keys = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Contender, keys, r.Callers, fmtNum(r.OpsPerSec, 0),
			fmtRatio(r.VsCeiling), fmtRatio(r.VsPeer), fmtNum(r.CommandsPerOp, 1), fmtNum(r.CmdstatUsecPerOp, 2), fmtNum(r.CPUUsecPerOp, 2))
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// WriteAllocs prints allocations per operation.
func WriteAllocs(w io.Writer, title string, rows []Allocs) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ncontender\tallocs/op\tops\t\n", title)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t\n", r.Contender, fmtNum(r.PerOp, 1), r.Ops)
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// WriteInstructions prints instructions per operation: for the total and the code figure, the
// median and the spread of the repetitions; and the server figures beside them.
func WriteInstructions(w io.Writer, title string, rows []Instructions) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ncontender\tinstr/op\tspread\tcode instr/op\tspread\tcallers\tcmds/op\tcmdstat µs/op\tcpu µs/op\t\n", title)
	pct := func(reps []float64) string { return fmtNum(100*Spread(reps), 2) + "%" }
	for _, r := range rows {
		code, codeSpread := "-", "-"
		if len(r.CodeReps) > 0 {
			code, codeSpread = fmtNum(r.CodePerOp, 0), pct(r.CodeReps)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.Contender, fmtNum(r.PerOp, 0), pct(r.Reps), code, codeSpread,
			r.Callers, fmtNum(r.CommandsPerOp, 1), fmtNum(r.CmdstatUsecPerOp, 2), fmtNum(r.CPUUsecPerOp, 2))
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}

// WriteHandoff prints the hand-off rows.
func WriteHandoff(w io.Writer, title, ceiling, peer string, rows []Handoff) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\ncontender\thand-offs\tstalls\tp50 ms\tp99 ms\tp50 vs %s\tp50 vs %s\tcmds/hand-off\t\n", title, ceiling, peer)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Contender, r.Count, r.Stalls, fmtNum(r.P50Ms, 3), fmtNum(r.P99Ms, 3),
			fmtRatio(r.P50VsCeiling), fmtRatio(r.P50VsPeer), fmtNum(r.CommandsPerHandoff, 1))
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
