package luakit

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func received(w *Watch) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

func TestTrackerWatch(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	a1, a2, b := tr.Watch("a"), tr.Watch("a"), tr.Watch("b\x00\xff")
	defer b.Stop()
	assert.Equal(t, 2, tr.keys())

	tr.OnInvalidations([]rueidis.RedisMessage{str(t, "a"), str(t, "zzz")})
	assert.True(t, received(a1))
	assert.True(t, received(a2))
	assert.False(t, received(b))

	// Coalescing: many invalidations, one pending value, never blocking.
	for range 10 {
		tr.OnInvalidations([]rueidis.RedisMessage{str(t, "b\x00\xff")})
	}
	assert.True(t, received(b))
	assert.False(t, received(b))

	// Empty (non-nil) batch wakes nothing; non-string entries are skipped.
	tr.OnInvalidations([]rueidis.RedisMessage{})
	tr.OnInvalidations([]rueidis.RedisMessage{msg(t, ':', "", 1)})
	assert.False(t, received(a1) || received(a2) || received(b))

	a1.Stop()
	a1.Stop() // idempotent
	tr.invalidate([]string{"a"})
	assert.False(t, received(a1))
	assert.True(t, received(a2))
	assert.Equal(t, 2, tr.keys())
	a2.Stop()
	assert.Equal(t, 1, tr.keys(), "map entry deleted with the last watch")
}

func TestTrackerFlushWakesAll(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	var ws []*Watch
	for i := range 5 {
		ws = append(ws, tr.Watch(fmt.Sprint("k", i%3)))
	}
	tr.OnInvalidations(nil)
	for _, w := range ws {
		assert.True(t, received(w))
		w.Stop()
	}
	assert.Equal(t, 0, tr.keys())
	tr.OnInvalidations(nil) // no watches: no-op
}

func TestTrackerHook(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	w := tr.Watch("k")
	defer w.Stop()
	var got []rueidis.RedisMessage
	called := false
	h := tr.Hook(func(m []rueidis.RedisMessage) { called, got = true, m })
	in := []rueidis.RedisMessage{str(t, "k")}
	h(in)
	assert.True(t, called)
	assert.Len(t, got, 1)
	assert.True(t, received(w))

	tr.Hook(nil)(nil) // nil next is allowed
	assert.True(t, received(w))
}

func TestNewTrackedClientNilTracker(t *testing.T) {
	t.Parallel()
	_, err := NewTrackedClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:1"}}, nil)
	require.Error(t, err)
}

func TestTracker_Concurrent(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	keys := []string{"a", "b", "c", "d"}
	msgs := make([][]rueidis.RedisMessage, len(keys))
	for i, k := range keys {
		msgs[i] = []rueidis.RedisMessage{str(t, k)}
	}
	stop := make(chan struct{})
	var inv sync.WaitGroup
	for i := range 4 {
		inv.Add(1)
		go func() {
			defer inv.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				time.Sleep(50 * time.Microsecond)
				if n%50 == 0 {
					tr.OnInvalidations(nil)
				} else {
					tr.OnInvalidations(msgs[(i+n)%len(msgs)])
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				w := tr.Watch(keys[(g+n)%len(keys)])
				if n%10 == 0 {
					select { // a flush or invalidation arrives soon
					case <-w.C():
					case <-time.After(10 * time.Second):
						t.Error("no wake-up within 10s")
					}
				}
				w.Stop()
				w.Stop()
			}
		}()
	}
	wg.Wait()
	close(stop)
	inv.Wait()
	assert.Equal(t, 0, tr.keys())
}

func TestArmResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v, cache int64
		exists   bool
		pttl     time.Duration
	}{
		{-2, -1, false, 0},
		{-2, 500, false, 0},
		{-1, -1, true, -1},
		{-1, 60000, true, 60000 * time.Millisecond}, // tracked key without expiry: re-check when the cache entry ends
		{1500, -1, true, 1500 * time.Millisecond},
		{1500, 0, true, 1500 * time.Millisecond},
		{1500, 700, true, 700 * time.Millisecond},
		{0, -1, true, 0},
	}
	for _, tt := range tests {
		e, p := armResult(tt.v, tt.cache)
		assert.Equal(t, tt.exists, e, "%+v", tt)
		assert.Equal(t, tt.pttl, p, "%+v", tt)
	}
}
