// Command coordkit-images builds the container images of testkit's container backend from the
// server binaries that `make setup` caches (FROM scratch: the binary, its loader and libraries;
// nothing is pulled from a registry):
//
//	go run ./cmd/coordkit-images [target...]   (default: every target)
//
// Without a Docker engine it says so and exits 0, or 1 when CI=true (CI must run the container pass).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coordkit/coordkit/testkit"
)

func main() {
	targets := testkit.AllTargets()
	if len(os.Args) > 1 {
		targets = nil
		for _, a := range os.Args[1:] {
			targets = append(targets, testkit.Target(a))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	refs, err := testkit.BuildImages(ctx, targets...)
	for _, r := range refs {
		fmt.Println("images:", r)
	}
	if err != nil {
		if errors.Is(err, testkit.ErrUnavailable) && os.Getenv("CI") != "true" {
			fmt.Println("images: skipped (the container pass will skip too):", err)
			return
		}
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
	fmt.Printf("images: %d ready in %v\n", len(refs), time.Since(start).Round(100*time.Millisecond))
}
