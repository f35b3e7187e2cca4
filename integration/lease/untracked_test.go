package lease_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordkit/coordkit/integration/internal/matrix"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/luakit"
)

// 15. A waiter wired with a tracker but on a cache-disabled client (no invalidation can ever arrive)
// still acquires a field that had no expiry once it is deleted: it re-checks on the untracked interval
// instead of sleeping until ctx ends. Its Leases logs one warning about waiting without invalidations,
// however many times it waits.
func testUntrackedNoExpiry(t *testing.T, e *env) {
	c := ctx(t)
	key := hashKey("s15")
	tr := luakit.NewTracker()
	logs := &warnings{}
	waiter := newLeases(t, e.NewClient(t, tr, matrix.NoCache),
		lease.WithTracker(tr), lease.WithLogger(slog.New(logs)))
	e.do(t, "HSET", key, "job", "foreign-holder-without-expiry")

	for round := range 2 {
		ch := acquireAsync(c, waiter, key, "job", 5*time.Second)
		time.Sleep(1500 * time.Millisecond) // at least one untracked re-check (1 s) while still held
		e.do(t, "HDEL", key, "job")
		r := await(t, ch, 10*time.Second) // generous: the untracked re-check interval is 1 s
		require.NoError(t, r.err)
		e.requireHeld(t, key, "job", r.lease.OwnerToken())
		release(t, r.lease, lease.Released)
		e.requireFieldAbsent(t, key, "job")
		if round == 0 {
			e.do(t, "HSET", key, "job", "foreign-holder-without-expiry")
		}
	}
	require.Equal(t, 1, logs.count("waiting without invalidations"), "one warning per Leases")
}

// warnings is a slog.Handler that records the messages of warning records.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}

// count returns how many recorded messages contain s.
func (w *warnings) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}
