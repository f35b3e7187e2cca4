package leader

import (
	"errors"
	"testing"
	"time"
)

func TestWithRecoveryBudget(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		ok   bool
	}{
		{"positive", time.Second, true},
		{"long", 100 * 365 * 24 * time.Hour, true},
		{"zero", 0, false},
		{"negative", -time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultConfig()
			err := WithRecoveryBudget(tt.d).apply(&c)
			if tt.ok != (err == nil) {
				t.Fatalf("WithRecoveryBudget(%v) = %v, want ok=%v", tt.d, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v must match ErrInvalidConfig", err)
			}
			if err == nil && c.recovery != tt.d {
				t.Fatalf("recovery = %v", c.recovery)
			}
		})
	}
	if c := defaultConfig(); c.recovery != DefaultRecoveryBudget || DefaultRecoveryBudget != 2*time.Minute {
		t.Fatalf("default recovery budget = %v", c.recovery)
	}
}
