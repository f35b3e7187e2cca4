package coordctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/luakit"
)

// Exit codes returned by [Run].
const (
	// ExitOK: the command succeeded (an absent key is a result, not a failure).
	ExitOK = 0
	// ExitFailure: the operation failed: server unreachable, a server error, or data at the key that the
	// module did not write.
	ExitFailure = 1
	// ExitUsage: bad usage, found before any I/O: unknown primitive, command or flag, a missing or
	// extra argument, an invalid URL, or an admin action without --yes.
	ExitUsage = 2
)

// Environment variables read by [Run].
const (
	// EnvURL is the default of --url.
	EnvURL = "COORDCTL_URL"
	// EnvUsername is the user name used when the URL has none.
	EnvUsername = "COORDCTL_USERNAME"
	// EnvPassword is the password used when the URL has none.
	EnvPassword = "COORDCTL_PASSWORD"
)

// defaultURL is used when neither --url nor COORDCTL_URL is set.
const defaultURL = "redis://127.0.0.1:6379"

// usageError marks an error found before any I/O: Run exits with ExitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// app holds the global flags and the lazily created client of one Run.
type app struct {
	url      string
	cluster  bool
	prefix   string
	json     bool
	policy   string // ratelimit's --policy
	timeout  time.Duration
	out      io.Writer
	client   rueidis.Client
	getenv   func(string) string
	closeFns []func()
}

// Run executes the coordctl command line args (without the program name), writing results to stdout
// and errors to stderr, and returns the process exit code ([ExitOK], [ExitFailure] or [ExitUsage]).
// It blocks until the command is done; ctx ends a watch and bounds every round trip (each also bounded
// by --timeout). It validates arguments before connecting, creates its own rueidis client (closed
// before it returns) and never prints owner tokens or passwords. Run is safe to call from several
// goroutines at once: calls share nothing.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{out: stdout, getenv: os.Getenv}
	defer a.close()
	root := a.command()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(stderr, "coordctl: "+err.Error())
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, luakit.ErrInvalidConfig) || isCobraUsage(err) {
		return ExitUsage
	}
	return ExitFailure
}

// isCobraUsage recognises cobra's own parse errors (unknown command, flag or argument count), which
// are plain errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires ",
		"flag needs an argument", "invalid argument", "bad flag syntax"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (a *app) close() {
	for i := len(a.closeFns) - 1; i >= 0; i-- {
		a.closeFns[i]()
	}
	if a.client != nil {
		a.client.Close()
	}
}

func (a *app) command() *cobra.Command {
	root := &cobra.Command{
		Use:   "coordctl",
		Short: "Inspect and administer Coordkit coordination state on Redis and Valkey",
		Long: "coordctl reads Coordkit's locks, leases, read-write locks, semaphores, latches, counters,\n" +
			"elections and idempotency claims through each module's read-only inspection, and runs a few\n" +
			"admin actions (they need --yes). Owner tokens and passwords are never printed.\n\n" +
			"Exit codes: 0 ok (an absent key is a result), 1 operation failed, 2 bad usage.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("a primitive is required (see coordctl --help)")
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", "server URL: redis:// or rediss://, user and password allowed (default $"+EnvURL+", else "+defaultURL+")")
	pf.BoolVar(&a.cluster, "cluster", false, "require the server to be a Redis/Valkey Cluster")
	pf.StringVar(&a.prefix, "prefix", "", "the key prefix the application's modules use (WithKeyPrefix)")
	pf.BoolVar(&a.json, "json", false, "print JSON (one object per inspection) instead of a table")
	pf.DurationVar(&a.timeout, "timeout", 5*time.Second, "bound on each round trip")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	for _, p := range primitives() {
		root.AddCommand(a.primitiveCommand(p))
	}
	root.AddCommand(a.watchCommand())
	return root
}

// connect validates the URL and creates the client on first use.
func (a *app) connect(ctx context.Context) (rueidis.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	if a.timeout <= 0 {
		return nil, usagef("--timeout must be positive")
	}
	raw := a.url
	if raw == "" {
		raw = a.getenv(EnvURL)
	}
	if raw == "" {
		raw = defaultURL
	}
	opt, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	if opt.Username == "" {
		opt.Username = a.getenv(EnvUsername)
	}
	if opt.Password == "" {
		opt.Password = a.getenv(EnvPassword)
	}
	opt.DisableCache = true
	opt.Dialer.Timeout = a.timeout
	opt.ConnWriteTimeout = a.timeout
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", strings.Join(opt.InitAddress, ","), err)
	}
	if a.cluster && c.Mode() != rueidis.ClientModeCluster {
		c.Close()
		return nil, fmt.Errorf("--cluster: the server at %s is not a Cluster", strings.Join(opt.InitAddress, ","))
	}
	a.client = c
	return c, nil
}

// parseURL is rueidis.ParseURL with an error that never quotes the URL (it may hold a password).
func parseURL(raw string) (rueidis.ClientOption, error) {
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return rueidis.ClientOption{}, usagef("--url must start with redis:// or rediss:// (value not shown)")
	}
	opt, err := rueidis.ParseURL(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if strings.Contains(err.Error(), raw) {
			err = errors.New("malformed")
		}
		return rueidis.ClientOption{}, usagef("invalid --url (value not shown): %v", err)
	}
	return opt, nil
}

// roundTrip bounds one call by --timeout.
func (a *app) roundTrip(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

func isUsage(err error) bool {
	var ue *usageError
	return errors.As(err, &ue) || errors.Is(err, luakit.ErrInvalidConfig)
}
