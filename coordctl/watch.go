package coordctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func (a *app) watchCommand() *cobra.Command {
	var (
		interval time.Duration
		count    int
	)
	cmd := &cobra.Command{
		Use:   "watch <primitive> <key>",
		Short: "repeat an inspection every --interval until interrupted (read-only)",
		Long: "watch runs `coordctl <primitive> inspect <key>` every --interval until SIGINT (or --count\n" +
			"refreshes). A failed refresh is reported on stderr and the watch goes on; the exit code is 1\n" +
			"when the last refresh failed. With --json it prints one JSON object per refresh.",
		Args: exactArgs("<primitive>", "<key>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p *primitive
			for _, q := range primitives() {
				if q.name == args[0] {
					p = &q
					break
				}
			}
			if p == nil {
				return usagef("watch: unknown primitive %q", args[0])
			}
			if interval < 10*time.Millisecond {
				return usagef("watch: --interval must be at least 10ms (got %v)", interval)
			}
			if count < 0 {
				return usagef("watch: --count must not be negative")
			}
			return a.watch(cmd.Context(), cmd, *p, args[1], interval, count)
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between refreshes")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many refreshes (0: until interrupted)")
	a.policyFlag(cmd)
	return cmd
}

func (a *app) watch(ctx context.Context, cmd *cobra.Command, p primitive, key string, interval time.Duration, count int) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for i := 0; count == 0 || i < count; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return last
			case <-t.C:
			}
		}
		v, err := a.inspectOnce(ctx, p, key)
		if ended(ctx) {
			return last // interrupted: the normal end of a watch
		}
		if err != nil {
			if isUsage(err) {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "coordctl: %s\n", err)
			last = err
			continue
		}
		last = nil
		if !a.json {
			fmt.Fprintf(a.out, "--- %s  %s %s (every %v)\n", time.Now().UTC().Format(time.RFC3339), p.name, quote(key), interval)
		}
		if err := a.render(a.out, v); err != nil {
			return err
		}
	}
	return last
}

// ended reports whether ctx has ended or reached its deadline (a round trip's child context can see
// the deadline before ctx's own timer has fired).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
