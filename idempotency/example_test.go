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

	a, err := st.TryBegin(ctx, key, 10*time.Minute, fp)
	if err != nil {
		return // ErrUncertain: a claim may exist; retry later, never assume success
	}
	switch a.State {
	case idempotency.Started:
		result := []byte("invoice-456") // do the work once, serialise its result
		if ok, err := st.Complete(ctx, key, a.OwnerToken, result); err != nil || !ok {
			fmt.Println("the claim expired before completion")
		}
	case idempotency.Completed:
		fmt.Println(string(a.Result))
	case idempotency.InProgress:
		fmt.Println("the original request is still running")
	case idempotency.FingerprintMismatch:
		fmt.Println("this key belongs to a different request")
	}
}

// Begin waits for an in-progress original instead of returning InProgress; with a tracker it wakes
// on the invalidation that the original's completion causes.
func ExampleStore_Begin() {
	tracker := luakit.NewTracker()
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, tracker)
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client, idempotency.WithTracker(tracker))

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
