// Command coordctl inspects and administers Coordkit's coordination state on Redis and Valkey (locks,
// leases, read-write locks, semaphores, latches, counters, elections, idempotency claims). See the
// package documentation of github.com/coordkit/coordkit/coordctl and coordctl --help.
//
//	go install github.com/coordkit/coordkit/coordctl/cmd/coordctl@latest
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/coordkit/coordkit/coordctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := coordctl.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
