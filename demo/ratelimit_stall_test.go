package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/testkit"
)

// The rate-limit step's checks hold when the limit is not saturated the whole run: here the server
// holds every client for 700 ms in the middle of the run (CLIENT PAUSE ALL), as a loaded machine can
// when it deschedules the server or the demo process for longer than the burst's refill time (50 ×
// 10 ms). GCRA's TAT then falls behind the server clock and restarts from it, so burst + floor(span /
// interval) no longer counts what the policy allows; the step must still find admitted == allowed by
// policy, computed by replaying the policy over the decisions' server times.
func TestRateLimitStepSurvivesStall(t *testing.T) {
	srv := testkit.Start(t, testkit.Redis70)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEnv(srv, config{workers: 5, rounds: 1})

	admin, err := rueidis.NewClient(srv.ClientOption())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	paused := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // into the run, after the burst
		paused <- admin.Do(ctx, admin.B().ClientPause().Timeout(700).All().Build()).Error()
	}()

	res, err := rateLimitStep(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-paused; err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	var rows []string
	for _, r := range res.rows {
		rows = append(rows, r.label+": "+r.value)
	}
	t.Logf("rows:\n%s", strings.Join(rows, "\n"))
	if failed := res.failed(); len(failed) > 0 {
		t.Fatalf("failed checks: %v", failed)
	}
}
