// Package callgrind counts the instructions a stretch of this process executes, every thread
// included, by running the process under valgrind's callgrind tool: the process calls [WindowStart]
// and [WindowEnd] around the stretch, which make callgrind client requests (the magic instruction
// sequence of valgrind.h, written in assembly for amd64): CALLGRIND_ZERO_STATS, which zeroes every
// thread's counts, and CALLGRIND_DUMP_STATS, which writes every thread's counts to the next numbered
// dump file. (Client requests need no symbol table, which go run strips; --toggle-collect, by symbol,
// would also count the toggling thread only.) [Command] starts a process under callgrind,
// [ParseTotal] reads a dump's total and [DumpPath] names the n-th dump.
//
// Go code runs under valgrind with asynchronous preemption off (its signals) and, here, one P and no
// garbage collector (GOGC=off), so that a window's count does not depend on when a collection or a
// spinning scheduler thread happened to run: Command sets GODEBUG, GOMAXPROCS and GOGC so.
package callgrind

import (
	"bufio"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Callgrind client requests (callgrind.h: VG_USERREQ_TOOL_BASE('C','T') + n).
const (
	requestDumpStats = uint64('C')<<24 | uint64('T')<<16 + iota
	requestZeroStats
)

// Supported reports whether WindowStart and WindowEnd make client requests on this architecture
// (amd64); elsewhere they do nothing and no dump is written.
const Supported = supported

// WindowStart marks the start of a counted window: under callgrind, it zeroes every thread's
// counts (CALLGRIND_ZERO_STATS). Outside valgrind it does nothing.
func WindowStart() { request(&[6]uint64{requestZeroStats}) }

// WindowEnd marks the end of a counted window: under callgrind, it writes every thread's counts
// since the last WindowStart to the next dump file (DumpPath(out, 1), then 2, ...;
// CALLGRIND_DUMP_STATS). Outside valgrind it does nothing.
func WindowEnd() { request(&[6]uint64{requestDumpStats}) }

// ErrNoValgrind is returned by Valgrind when no valgrind executable is found.
var ErrNoValgrind = errors.New("callgrind: valgrind not found in $PATH")

// Valgrind returns the path of the valgrind executable in $PATH, or ErrNoValgrind.
func Valgrind() (string, error) {
	p, err := exec.LookPath("valgrind")
	if err != nil {
		return "", ErrNoValgrind
	}
	return p, nil
}

// Command returns the command that runs exe with args under valgrind (the path valgrind) with
// callgrind counting instructions only (no cache simulation), its dumps written to out (dump n to
// DumpPath(out, n)) and its log to out + ".log", and the environment of this process plus
// GODEBUG=asyncpreemptoff=1, GOMAXPROCS=1, GOGC=off and env. The command is not started.
func Command(ctx context.Context, valgrind, out, exe string, args []string, env ...string) *exec.Cmd {
	vargs := []string{"--tool=callgrind", "--callgrind-out-file=" + out, "--log-file=" + out + ".log", exe}
	cmd := exec.CommandContext(ctx, valgrind, append(vargs, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1", "GOGC=off")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// DumpPath returns the path of the n-th dump (n from 1) of a Command run with output file out.
func DumpPath(out string, n int) string { return out + "." + strconv.Itoa(n) }

// Log returns the tail (at most max bytes) of the valgrind log of a Command run with output file
// out, for an error message; "" when there is none.
func Log(out string, max int) string {
	b, err := os.ReadFile(filepath.Clean(out + ".log"))
	if err != nil {
		return ""
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Profile is one callgrind dump: its total instruction count and each function's own (exclusive)
// count, by name.
type Profile struct {
	// Total is the dump's "totals:" figure (its "summary:" when there is no "totals:" line): every
	// instruction of the window, every thread.
	Total int64
	// Self is each function's own instructions (Ir of its cost lines, not of the calls it makes),
	// by the name callgrind gives it ("0x..." for a function of a binary without a symbol table).
	Self map[string]int64
	// Calls is the inclusive instructions of the calls to each function (the function and all it
	// calls, from every call site; a recursive function's inner calls counted again), by name.
	Calls map[string]int64
}

// Sum returns the own instructions of the functions for which keep returns true.
func (p Profile) Sum(keep func(fn string) bool) int64 {
	var n int64
	for fn, c := range p.Self {
		if keep(fn) {
			n += c
		}
	}
	return n
}

// runtimePrefixes are the Go packages whose work in a window depends on timing rather than on the
// code measured: the scheduler and its idle path, the network poller, system calls, and the slow
// (contended) paths of sync.
var runtimePrefixes = []string{"runtime.", "runtime/", "internal/runtime/", "internal/poll.", "syscall.", "internal/syscall/",
	"sync.", "sync/", "internal/sync.", "internal/race."}

// GoCode reports whether fn is a Go function outside the Go runtime, the network poller, system
// calls and sync (see Profile.Sum): the code of the libraries and of the standard library above
// them. A function with no Go package path (C code, "0x..." addresses) is not.
func GoCode(fn string) bool {
	if !strings.Contains(fn, ".") || strings.HasPrefix(fn, "0x") {
		return false
	}
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(fn, p) {
			return false
		}
	}
	return true
}

// Parse reads a callgrind output file (format version 1, as callgrind writes it: name compression,
// relative positions): its total and the own instructions (event Ir) of each function. The total
// is the "totals:" line, or the "summary:" line when there is no "totals:" (one of them is
// required); the "positions:" and "events:" lines say which column is Ir; the cost line after a
// calls= line is the call's inclusive cost (Calls), not the caller's own. A malformed file is an
// error.
func Parse(r io.Reader) (Profile, error) {
	p := Profile{Self: map[string]int64{}, Calls: map[string]int64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	positions, col := 1, 0
	var summary, totals int64 = -1, -1
	names := map[string]string{} // "(id)" -> name, functions (fn=, cfn=)
	fn, cfn := "", ""            // the current function, the callee of the last cfn= line
	callCost := false            // the next cost line is a call's (inclusive) cost, of cfn
	name := func(v string) (string, error) {
		v = strings.TrimSpace(v)
		if !strings.HasPrefix(v, "(") {
			return v, nil
		}
		id, n, ok := strings.Cut(v, ")")
		if !ok {
			return "", fmt.Errorf("callgrind: bad name %q", v)
		}
		if n = strings.TrimSpace(n); n != "" {
			names[id] = n
			return n, nil
		}
		if n, ok = names[id]; !ok {
			return "", fmt.Errorf("callgrind: undefined name %q", v)
		}
		return n, nil
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if c := line[0]; c >= '0' && c <= '9' || c == '+' || c == '-' || c == '*' { // a cost line
			f := strings.Fields(line)
			var n int64
			if i := positions + col; i < len(f) {
				var err error
				if n, err = strconv.ParseInt(f[i], 10, 64); err != nil || n < 0 {
					return p, fmt.Errorf("callgrind: bad cost line %q", line)
				}
			}
			if callCost {
				callCost = false
				p.Calls[cfn] += n
				continue
			}
			if fn == "" {
				return p, fmt.Errorf("callgrind: cost line %q outside a function", line)
			}
			p.Self[fn] += n
			continue
		}
		key, rest, ok := strings.Cut(line, "=")
		if ok && !strings.ContainsAny(key, " \t:") {
			var err error
			switch key {
			case "fn":
				fn, err = name(rest)
			case "cfn":
				cfn, err = name(rest)
			case "calls":
				if cfn == "" {
					err = fmt.Errorf("callgrind: %q without cfn=", line)
				}
				callCost = true
			}
			if err != nil {
				return p, err
			}
			continue
		}
		key, rest, ok = strings.Cut(line, ":")
		if !ok || strings.ContainsAny(key, " \t") {
			continue
		}
		switch key {
		case "positions":
			positions = len(strings.Fields(rest))
			if positions == 0 {
				return p, fmt.Errorf("callgrind: bad %q", line)
			}
		case "events":
			col = slices.Index(strings.Fields(rest), "Ir")
			if col < 0 {
				return p, fmt.Errorf("callgrind: no Ir event in %q", line)
			}
		case "summary", "totals":
			if col < 0 {
				return p, fmt.Errorf("callgrind: no Ir event before %q", line)
			}
			f := strings.Fields(rest)
			if col >= len(f) {
				return p, fmt.Errorf("callgrind: no Ir count in %q", line)
			}
			n, err := strconv.ParseInt(f[col], 10, 64)
			if err != nil || n < 0 {
				return p, fmt.Errorf("callgrind: bad count in %q", line)
			}
			if key == "summary" {
				summary = n
			} else {
				totals = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("callgrind: %w", err)
	}
	switch {
	case totals >= 0:
		p.Total = totals
	case summary >= 0:
		p.Total = summary
	default:
		return p, errors.New("callgrind: no summary: or totals: line")
	}
	return p, nil
}

// HasSymbols reports whether the ELF executable exe has a symbol table, from which callgrind names
// functions (go run and go test strip it unless given -ldflags=-s=false; without it, the names are
// addresses and Sum(GoCode) is 0).
func HasSymbols(exe string) bool {
	f, err := elf.Open(exe)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".symtab") != nil
}

// ParseFile is Parse of the file at path.
func ParseFile(path string) (Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return Profile{}, err
	}
	defer f.Close()
	p, err := Parse(f)
	if err != nil {
		return Profile{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
