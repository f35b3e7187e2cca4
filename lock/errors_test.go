package lock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// TestVocabularyErrors: the conditions every module shares are luakit's values, every bad argument
// matches ErrInvalidConfig, and foreign data at the fence key matches ErrForeignData.
func TestVocabularyErrors(t *testing.T) {
	if ErrNilClient != luakit.ErrNilClient {
		t.Errorf("ErrNilClient is not luakit's")
	}
	_, err := New(nil)
	if !errors.Is(err, luakit.ErrNilClient) || !strings.HasPrefix(err.Error(), "lock: ") {
		t.Errorf("New(nil) = %v, want luakit.ErrNilClient with the lock: prefix", err)
	}
	if !errors.Is(ErrSameKey, luakit.ErrInvalidConfig) {
		t.Errorf("ErrSameKey does not match ErrInvalidConfig")
	}
	for _, tt := range []struct {
		reason  CounterReason
		foreign bool
	}{
		{CounterWrongType, true},
		{CounterMalformed, true},
		{CounterNegative, true},
		{CounterExpiring, false},
		{CounterOverflow, false},
	} {
		err := error(&CounterError{Reason: tt.reason})
		if got := errors.Is(err, luakit.ErrForeignData); got != tt.foreign {
			t.Errorf("CounterError{%s} matches ErrForeignData = %v, want %v", tt.reason, got, tt.foreign)
		}
		if !errors.Is(err, ErrCounter) {
			t.Errorf("CounterError{%s} does not match ErrCounter", tt.reason)
		}
	}
}

// TestArgumentErrorsMatchInvalidConfig: every error found before any I/O matches ErrInvalidConfig and
// starts with "lock: ".
func TestArgumentErrorsMatchInvalidConfig(t *testing.T) {
	l, err := New(noIO{ClientMode: rueidis.ClientModeCluster})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name         string
		lease, fence string
		ttl          time.Duration
	}{
		{"empty lease key", "", "f", time.Second},
		{"empty fence key", "l", "", time.Second},
		{"ttl", "l", "f", 0},
		{"same key", "k", "k", time.Second},
		{"cross slot", "a:lease", "b:fence", time.Second},
	} {
		_, err := l.TryAcquireKeys(ctx, tt.lease, tt.fence, tt.ttl)
		if !errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "lock: ") {
			t.Errorf("%s: %v, want ErrInvalidConfig with the lock: prefix", tt.name, err)
		}
	}
	for _, o := range []Option{WithRenewFraction(0), WithCleanupTimeout(0), WithRetryDelay(0)} {
		if _, err := New(noIO{}, o); !errors.Is(err, luakit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "lock: ") {
			t.Errorf("New with a bad option = %v, want ErrInvalidConfig with the lock: prefix", err)
		}
	}
}
