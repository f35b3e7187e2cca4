package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
)

// This example claims a key, does the work once, and stores its result; duplicates get the result.
// It needs a server, so it is compiled but not run.
func ExampleStore_TryBegin() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client, idempotency.WithKeyPrefix("myapp:"))

	request := []byte(`{"amount":100}`)
	sum := sha256.Sum256(request)
	fp := idempotency.FingerprintOf(hex.EncodeToString(sum[:]))
	key := "tenant-42:create-invoice:request-123"

	// A 10s claim lease (kept alive below); the result is replayed for 24h.
	a, err := st.TryBegin(ctx, key, 10*time.Second, fp)
	if err != nil {
		return // ErrUncertain: a claim may exist; retry later, never assume success
	}
	switch a.State {
	case idempotency.Started:
		claim, err := st.Claim(key, a)
		if err != nil || claim.KeepAlive(ctx) != nil {
			return
		}
		result := createInvoice(claim.Context()) // do the work once (stopping if it ends), serialise its result
		claim.Stop()
		if ok, err := st.Complete(ctx, key, a.OwnerToken, result, 24*time.Hour); err != nil || !ok {
			fmt.Println("the claim was lost before completion")
		}
	case idempotency.Completed:
		fmt.Println(string(a.Result))
	case idempotency.InProgress:
		fmt.Println("the original request is still running")
	case idempotency.FingerprintMismatch:
		fmt.Println("this key belongs to a different request")
	}
}

func createInvoice(ctx context.Context) []byte { return []byte("invoice-456") }

// KeepAlive renews a claim while long work runs; the claim's context ends if the claim is lost. It
// needs a server, so it is compiled but not run.
func ExampleClaim_KeepAlive() {
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client)
	a, err := st.TryBegin(ctx, "export-2026-12", 15*time.Second, idempotency.NoFingerprint)
	if err != nil || a.State != idempotency.Started {
		return
	}
	claim, err := st.Claim("export-2026-12", a)
	if err != nil || claim.KeepAlive(ctx) != nil { // renews every 5s
		return
	}
	select {
	case <-time.After(time.Minute): // the long work, longer than the lease
	case <-claim.Done():
		fmt.Println("stopped:", claim.Err()) // idempotency.ErrLost or ErrExpired
	}
	claim.Stop()
	_, _ = st.Complete(ctx, "export-2026-12", a.OwnerToken, []byte("done"), time.Hour)
}

// Inspect shows an operator a claim's state without changing it (no TTL refresh). It needs a server,
// so it is compiled but not run.
func ExampleStore_Inspect() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client, idempotency.WithKeyPrefix("myapp:"))
	in, err := st.Inspect(context.Background(), "tenant-42:create-invoice:request-123")
	switch {
	case err != nil:
	case !in.Exists:
		fmt.Println("free")
	case in.State == idempotency.InProgress:
		fmt.Printf("pending (generation %d), lease %v, freed in %v unless renewed\n", in.Generation, in.TTL, in.Remaining)
	default:
		fmt.Printf("%d-byte result kept for %v more\n", in.ResultSize, in.Remaining)
	}
}

// Begin waits for an in-progress original instead of returning InProgress; on a client from
// luakit.NewTrackedClient it wakes on the invalidation that the original's completion causes.
func ExampleStore_Begin() {
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, luakit.NewTracker())
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client) // Begin finds the client's tracker

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := st.Begin(ctx, "job-7", time.Minute, idempotency.NoFingerprint)
	if err != nil {
		return
	}
	fmt.Println(a.State) // started (the original vanished) or completed
}

func ExampleFingerprintOf() {
	fmt.Println(idempotency.NoFingerprint == idempotency.FingerprintOf(""))
	d, ok := idempotency.FingerprintOf("").Digest()
	fmt.Printf("%q %v\n", d, ok)
	// Output:
	// false
	// "" true
}
