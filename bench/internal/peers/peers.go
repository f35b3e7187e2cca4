// Package peers holds the pure parts of the side-by-side peer runner (bench/cmd/peers): medians,
// the rotated order of rounds, the parsing of INFO commandstats and INFO cpu, per-operation and
// ratio math, the JSON report and the printed tables.
package peers

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Median returns the median of xs (the mean of the two middle values for an even count); 0 for none.
// xs is unchanged.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Rotate returns the order of names for round r: names rotated left by r mod len(names), so each
// name runs first in some round. names is unchanged.
func Rotate(names []string, r int) []string {
	if len(names) == 0 {
		return nil
	}
	k := ((r % len(names)) + len(names)) % len(names)
	return append(slices.Clone(names[k:]), names[:k]...)
}

// Stat is one command's line of INFO commandstats: calls and total CPU time in microseconds.
type Stat struct {
	Calls int64
	Usec  int64
}

// ErrMalformed reports a commandstats line that cannot be parsed.
var ErrMalformed = errors.New("peers: malformed commandstats line")

// ParseCommandstats parses the reply of INFO commandstats ("cmdstat_<name>:calls=N,usec=N,...")
// into stats by lower-case command name (subcommands as "config|get"). Comment and blank lines are
// skipped; other lines not starting with cmdstat_ are ignored; a cmdstat_ line without integer calls
// and usec fields returns ErrMalformed.
func ParseCommandstats(info string) (map[string]Stat, error) {
	out := map[string]Stat{}
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok || name == "" {
			return nil, ErrMalformed
		}
		var st Stat
		var haveCalls, haveUsec bool
		for f := range strings.SplitSeq(fields, ",") {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			switch k {
			case "calls":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, ErrMalformed
				}
				st.Calls, haveCalls = n, true
			case "usec":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 0 {
					return nil, ErrMalformed
				}
				st.Usec, haveUsec = n, true
			}
		}
		if !haveCalls || !haveUsec {
			return nil, ErrMalformed
		}
		out[strings.ToLower(name)] = st
	}
	return out, nil
}

// Delta returns after minus before summed over all commands, leaving out the names in skip (such as
// "info" itself): total calls and usec executed between the two snapshots.
func Delta(before, after map[string]Stat, skip ...string) Stat {
	var d Stat
	for name, a := range after {
		if slices.Contains(skip, name) {
			continue
		}
		b := before[name]
		d.Calls += a.Calls - b.Calls
		d.Usec += a.Usec - b.Usec
	}
	return d
}

// scriptCommands are the commands that run a script; the commands a script runs are counted on
// their own too, and the script's usec already includes theirs.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// Work returns the server work between two snapshots, leaving out the names in skip: Calls counts
// every command, those run inside scripts included; Usec avoids counting a script's commands twice
// (commandstats counts a script's time, which includes its commands', and its commands' time again):
// when any script ran, it is the scripts' usec alone (a command sent beside the scripts, such as
// redsync's top-level SET NX, is then left out: about 1 µs each); otherwise every command's usec.
func Work(before, after map[string]Stat, skip ...string) Stat {
	all := Delta(before, after, skip...)
	var scripts Stat
	for _, name := range scriptCommands {
		if slices.Contains(skip, name) {
			continue
		}
		a, b := after[name], before[name]
		scripts.Calls += a.Calls - b.Calls
		scripts.Usec += a.Usec - b.Usec
	}
	if scripts.Calls > 0 {
		return Stat{Calls: all.Calls, Usec: scripts.Usec}
	}
	return all
}
