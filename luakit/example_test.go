package luakit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/luakit"
	"github.com/redis/rueidis"
)

func ExampleSlot() {
	fmt.Println(luakit.Slot("foo"))
	fmt.Println(luakit.Slot("{user1000}.following") == luakit.Slot("{user1000}.followers"))
	fmt.Println(luakit.HashTag("foo{bar}{zap}"))
	// Output:
	// 12182
	// true
	// bar
}

func ExampleKeyspace_Key() {
	ks := luakit.NewKeyspace("{orders}:")
	lease, fence := ks.Key("lease"), ks.Key("fence")
	fmt.Println(lease, fence)
	fmt.Println(luakit.CheckSameSlot(
		luakit.NamedKey{Role: "lease key", Key: lease},
		luakit.NamedKey{Role: "fence key", Key: fence},
	))
	// Output:
	// {orders}:lease {orders}:fence
	// <nil>
}

func ExampleCheckSameSlot() {
	err := luakit.CheckSameSlot(
		luakit.NamedKey{Role: "lease key", Key: "orders:lease"},
		luakit.NamedKey{Role: "fence key", Key: "orders:fence"},
	)
	fmt.Println(errors.Is(err, luakit.ErrCrossSlot))
	fmt.Println(err)
	// Output:
	// true
	// luakit: lease key (slot 8732) and fence key (slot 3056) hash to different Cluster slots; use a common hash tag like {name}
}

func ExampleParseInt64() {
	// 2^53+3 is not representable as a double, so a script returns it as a string.
	v, err := luakit.ParseInt64("9007199254740995")
	fmt.Println(v, err)
	_, err = luakit.ParseInt64("01")
	fmt.Println(errors.Is(err, luakit.ErrMalformedInt))
	// Output:
	// 9007199254740995 <nil>
	// true
}

func ExampleClassify() {
	fmt.Println(luakit.Classify(nil))
	fmt.Println(luakit.Classify(context.DeadlineExceeded))
	fmt.Println(luakit.Classify(&luakit.UnsupportedError{Feature: "hash-field expiry", Command: "HPEXPIRE"}))
	// Output:
	// none
	// uncertain
	// terminal
}

// Waiting for a key to change without polling: watch, arm, try, then sleep
// until an invalidation or the PTTL deadline, whichever comes first.
func ExampleTracker() {
	tracker := luakit.NewTracker()
	client, err := luakit.NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}}, tracker)
	if err != nil {
		return
	}
	defer client.Close()

	ctx := context.Background()
	key := "{orders}:lease"
	for {
		w := tracker.Watch(key) // before Arm, so no invalidation is missed
		exists, pttl, err := luakit.Arm(ctx, client, key)
		if err != nil || !exists {
			w.Stop()
			break // gone (or an error): try to acquire
		}
		wait := time.Minute
		if pttl >= 0 {
			wait = pttl
		}
		timer := time.NewTimer(wait)
		select {
		case <-w.C():
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		w.Stop()
	}
}
