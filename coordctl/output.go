package coordctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// view is one inspection's result: JSON-encodable, and rows for the table.
type view interface {
	rows() [][2]string
}

// render prints v as JSON (one line) or as a two-column table.
func (a *app) render(w io.Writer, v any) error {
	if a.json {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if vv, ok := v.(view); ok {
		for _, r := range vv.rows() {
			fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
		}
	} else {
		fmt.Fprintf(tw, "%v\n", v)
	}
	return tw.Flush()
}

// ms converts a duration to whole milliseconds, keeping the -1 of "no expiry".
func ms(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// msOrNoExpiry is ms(d), or -1 (no expiry, as coordctl prints it) when noExpiry.
func msOrNoExpiry(d time.Duration, noExpiry bool) int64 {
	if noExpiry {
		return -1
	}
	return ms(d)
}

// human prints a millisecond count for the table: "no expiry" for -1.
func human(msv int64) string {
	if msv < 0 {
		return "no expiry"
	}
	return (time.Duration(msv) * time.Millisecond).String()
}

func humanList(v []int64) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = human(x)
	}
	return strings.Join(s, ", ")
}

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// quote prints a key for the table, escaping bytes that are not printable.
func quote(k string) string { return strconv.Quote(k) }
