// Command demo runs Coordkit's primitives against a real, throwaway Redis and checks their invariants.
//
//	make demo          # or: cd demo && go run .
//	go run . -workers 8 -rounds 50
//	COORDKIT_REDIS_URL=redis://127.0.0.1:6379 go run .   # use a server you run instead
//
// It starts a server with testkit (the process backend: binaries installed by scripts/servers.sh, or
// the server named by COORDKIT_REDIS_URL), runs every step of the scenario in one process, prints a
// table per step and ends with one line: "RESULT ok ..." (exit 0) or "RESULT fail ..." (exit 1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coordkit/coordkit/testkit"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run parses args, starts the server, runs the steps and returns the exit code. Every resource it
// opens is closed before it returns (main calls os.Exit, which skips deferred calls).
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.Int("workers", 5, "number of workers, each with its own client (at least 2)")
	rounds := fs.Int("rounds", 20, "lock acquisitions per worker")
	target := fs.String("target", string(testkit.Redis70), "server target to launch (testkit target name); COORDKIT_REDIS_URL overrides with an external server")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run, server start included")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := config{workers: *workers, rounds: *rounds}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return 2
	}
	if !testkit.Target(*target).Known() {
		fmt.Fprintf(stderr, "demo: unknown -target %q (known: %v)\n", *target, testkit.AllTargets())
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	srv, err := testkit.Launch(ctx, testkit.Target(*target))
	if err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		fmt.Fprintf(stdout, "RESULT fail could not start a %s server (run `make setup`, or set %s)\n", *target, testkit.EnvRedisURL)
		return 1
	}
	defer func() {
		if err := srv.Close(); err != nil {
			fmt.Fprintf(stderr, "demo: closing server: %v\n", err)
		}
	}()

	e := newEnv(srv, cfg)
	if ok := runSteps(ctx, e, steps, stdout); !ok {
		return 1
	}
	return 0
}
