package luakit

import (
	"errors"
	"strings"
	"testing"
)

func TestCounterError(t *testing.T) {
	for _, tt := range []struct {
		reason  CounterReason
		foreign bool
	}{
		{CounterExpiring, false}, {CounterNegative, true}, {CounterMalformed, true},
		{CounterOverflow, false}, {CounterWrongType, true}, {"other", false},
	} {
		err := error(&CounterError{Reason: tt.reason})
		if !errors.Is(err, ErrCounter) {
			t.Errorf("%s: not ErrCounter", tt.reason)
		}
		if errors.Is(err, ErrForeignData) != tt.foreign {
			t.Errorf("%s: matches ErrForeignData = %v, want %v", tt.reason, !tt.foreign, tt.foreign)
		}
		if !strings.HasPrefix(err.Error(), "coordkit: ") || strings.Contains(err.Error(), "{") {
			t.Errorf("%s: message %q", tt.reason, err.Error())
		}
	}
}
