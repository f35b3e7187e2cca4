package hooks_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/idempotency"
)

// waitCount polls the journal until it holds n entries equal to entry (a synchronisation, not a
// timing check) and returns what it took.
func waitCount(t *testing.T, j *journal, entry string, n int) []string {
	t.Helper()
	var got []string
	for {
		got = append(got, j.take()...)
		c := 0
		for _, e := range got {
			if e == entry {
				c++
			}
		}
		if c >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testIdempotencyHooks checks that each Store call is admitted once with the Store's name, that a
// rejected claim writes nothing, and that each KeepAlive renewal is its own IDEMPOTENCY EXTEND, a
// rejected one kept and retried like a failed one.
func testIdempotencyHooks(t *testing.T, e *env) {
	ctx := context.Background()
	j := &journal{}
	s, err := idempotency.New(e.client(t), idempotency.WithHooks(j), idempotency.WithInstance("orders"),
		idempotency.WithRetryDelay(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	j.setReject("IDEMPOTENCY TRY BEGIN")
	if _, err := s.TryBegin(ctx, "req-1", time.Minute, idempotency.NoFingerprint); err != errRejected { //nolint:errorlint // unchanged
		t.Fatalf("TryBegin = %v", err)
	}
	if exists(t, e.Raw, "req-1") {
		t.Fatal("a rejected claim wrote the key")
	}
	j.setReject()
	a, err := s.TryBegin(ctx, "req-1", 9*time.Second, idempotency.NoFingerprint)
	if err != nil || a.State != idempotency.Started {
		t.Fatalf("TryBegin = %+v %v", a, err)
	}
	expect(t, j, "admit IDEMPOTENCY TRY BEGIN", "admit IDEMPOTENCY TRY BEGIN", "done IDEMPOTENCY TRY BEGIN succeeded")

	j.setReject("IDEMPOTENCY EXTEND")
	claim, err := s.Claim("req-1", a)
	if err != nil {
		t.Fatal(err)
	}
	if err := claim.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	kctx, stop := claim.Context(), claim.Stop
	defer stop()
	got := waitCount(t, j, "admit IDEMPOTENCY EXTEND", 3)
	if slices.Contains(got, "done IDEMPOTENCY EXTEND succeeded") || kctx.Err() != nil {
		t.Fatalf("rejected renewals: journal %q, keep-alive context %v (a rejection must be retried, not lose the claim)", got, kctx.Err())
	}
	j.setReject()
	waitCount(t, j, "done IDEMPOTENCY EXTEND succeeded", 1)
	if kctx.Err() != nil {
		t.Fatalf("keep-alive ended: %v", context.Cause(kctx))
	}
	stop()
	j.take()
	if ok, err := s.Complete(ctx, "req-1", a.OwnerToken, []byte("done"), time.Minute); err != nil || !ok {
		t.Fatalf("Complete = %v %v", ok, err)
	}
	expect(t, j, "admit IDEMPOTENCY COMPLETE", "done IDEMPOTENCY COMPLETE succeeded")
}
