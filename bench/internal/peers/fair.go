package peers

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Fair is the result of the fair section: the fair lock's FIFO order and fencing tokens under load,
// and the delay a killed waiter adds to the queue.
type Fair struct {
	FIFO   FairFIFO   `json:"fifo"`
	Killed FairKilled `json:"killed_waiter"`
	// Seconds is the section's run time.
	Seconds float64 `json:"section_seconds"`
}

// Violations returns the order and token violations of f: a correct fair lock has none.
func (f *Fair) Violations() int { return f.FIFO.OrderViolations + f.FIFO.TokenViolations }

// FairFIFO is the FIFO check: in each round a holder holds the lock while Waiters waiters queue one
// after the other (each on its own FairLocker, Clients clients shared among them), and the holder's
// release starts the hand-offs down the queue, while LoadCallers goroutines run lock cycles on other
// keys. Totals over Rounds rounds.
type FairFIFO struct {
	Rounds      int `json:"rounds"`
	Waiters     int `json:"waiters_per_round"`
	Clients     int `json:"clients"`
	LoadCallers int `json:"load_callers"`
	// LoadCycles is the background lock cycles completed during the rounds.
	LoadCycles int64 `json:"load_cycles"`
	// Grants is the waiters that were granted the lease (Rounds * Waiters in a complete run).
	Grants int `json:"grants"`
	// OrderViolations counts grants out of queue order, and waiters never granted (see CountFIFO).
	OrderViolations int `json:"order_violations"`
	// TokenViolations counts grants whose fencing token is not above the previous holder's.
	TokenViolations int `json:"token_violations"`
	// P50Ms and P99Ms are the hand-off times: the previous holder's release call -> the next waiter's
	// Acquire returned, over every grant of every round.
	P50Ms float64 `json:"handoff_p50_ms"`
	P99Ms float64 `json:"handoff_p99_ms"`
}

// FairKilled is the killed-waiter check: a waiter in another process is queued first, a live waiter
// behind it, and the waiter's process is killed before the holder releases. InSlice releases at once
// (the dead waiter's key still exists, so it is granted the lease, and the live waiter takes it
// back at a renewal); AfterSlice releases once the dead waiter's key expired (it is skipped). The
// delays run from the holder's release call to the live waiter's Acquire returning. SliceMs is both
// waiters' wait slice, DeadTTLMs the killed waiter's lease TTL.
type FairKilled struct {
	SliceMs    float64     `json:"slice_ms"`
	DeadTTLMs  float64     `json:"dead_ttl_ms"`
	InSlice    DelaySpread `json:"killed_in_slice"`
	AfterSlice DelaySpread `json:"killed_after_slice"`
}

// DelaySpread is the minimum, median and maximum of a few delays, and each of them (ms). DeadGrants is how
// many times the release granted the lease to the killed waiter (read just after the release);
// HeldToTTL how many times the live waiter acquired only after that lease's TTL (it was not taken
// back); SliceLeftMs what was left of the killed waiter's slice as each release was sent (its
// waiter key's PTTL just before it; 0 once it expired), in the order of Ms.
type DelaySpread struct {
	MinMs      float64   `json:"min_ms"`
	MedianMs   float64   `json:"median_ms"`
	MaxMs      float64   `json:"max_ms"`
	Ms         []float64 `json:"ms"`
	DeadGrants int       `json:"dead_grants"`
	HeldToTTL  int       `json:"held_to_ttl"`
	// SliceLeftMs is what was left of the killed waiter's slice after each release.
	SliceLeftMs []float64 `json:"slice_left_ms"`
}

// DelaySpreadOf returns the DelaySpread of ds (DeadGrants and HeldToTTL left 0).
func DelaySpreadOf(ds []time.Duration) DelaySpread {
	var s DelaySpread
	for _, d := range ds {
		s.Ms = append(s.Ms, ms(d))
	}
	if len(s.Ms) > 0 {
		s.MinMs, s.MaxMs, s.MedianMs = slices.Min(s.Ms), slices.Max(s.Ms), Median(s.Ms)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// CountFIFO checks one round of grants against the queue: order[j] is the queue index of the j-th
// waiter granted, tokens[j] its fencing token, first the holder's token, waiters the queue's length.
// An order violation is a grant j to any waiter but the j-th queued, or a queued waiter never granted;
// a token violation is a token not above the one granted before it.
func CountFIFO(order []int, tokens []int64, first int64, waiters int) (orderViolations, tokenViolations int) {
	for j, i := range order {
		if i != j {
			orderViolations++
		}
	}
	orderViolations += max(waiters-len(order), 0)
	prev := first
	for _, t := range tokens {
		if t <= prev {
			tokenViolations++
		}
		prev = t
	}
	return orderViolations, tokenViolations
}

// WriteFair prints the fair section's two tables.
func WriteFair(w io.Writer, f *Fair) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	q := f.FIFO
	fmt.Fprintf(tw, "Fair lock FIFO under load: %d rounds, %d waiters each over %d clients, %d background lock-cycle callers (%d cycles)\n",
		q.Rounds, q.Waiters, q.Clients, q.LoadCallers, q.LoadCycles)
	fmt.Fprintf(tw, "waiters\tgrants\torder violations\ttoken violations\thand-off p50 ms\thand-off p99 ms\t\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t\n", q.Rounds*q.Waiters, q.Grants, q.OrderViolations, q.TokenViolations, fmtNum(q.P50Ms, 3), fmtNum(q.P99Ms, 3))
	fmt.Fprintln(tw)
	k := f.Killed
	fmt.Fprintf(tw, "Killed waiter: holder's release call -> the live waiter behind it acquired (slice %s ms, bound: the slice plus a renewal round trip; dead waiter's TTL %s ms)\n",
		fmtNum(k.SliceMs, 0), fmtNum(k.DeadTTLMs, 0))
	fmt.Fprintf(tw, "killed\trepetitions\tgranted to the dead\theld to its TTL\tmin ms\tmedian ms\tmax ms\t\n")
	for _, row := range []struct {
		label string
		s     DelaySpread
	}{{"within its slice", k.InSlice}, {"after its slice", k.AfterSlice}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t\n", row.label, len(row.s.Ms), row.s.DeadGrants, row.s.HeldToTTL, fmtNum(row.s.MinMs, 1), fmtNum(row.s.MedianMs, 1), fmtNum(row.s.MaxMs, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "within its slice, each repetition: delay ms (slice left at the release, ms):")
	for i, d := range k.InSlice.Ms {
		left := 0.0
		if i < len(k.InSlice.SliceLeftMs) {
			left = k.InSlice.SliceLeftMs[i]
		}
		fmt.Fprintf(w, " %s (%s)", fmtNum(d, 1), fmtNum(left, 0))
	}
	_, err := fmt.Fprintf(w, "\nfair section: %s s\n\n", fmtNum(f.Seconds, 1))
	return err
}
