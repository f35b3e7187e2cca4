package rwlock

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"
)

// TestInspectValidationBeforeIO: an empty key fails before any I/O (noIO panics on a command).
func TestInspectValidationBeforeIO(t *testing.T) {
	t.Parallel()
	l, err := New(noIO{ClientMode: rueidis.ClientModeStandalone})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(context.Background(), ""); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("empty key: %v", err)
	}
}
