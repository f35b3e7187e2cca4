package ratelimit

import (
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/luakit"
)

// The options of New and NewKeyed are told apart by their types: an option of one constructor is not
// an option of the other unless it configures both, so a misplaced option does not compile. (The
// assertions go through any because the misplaced uses would not compile.)
func TestOptionTypes(t *testing.T) {
	dl := testDenyList(t)
	tests := []struct {
		name           string
		opt            any
		limiter, keyed bool
	}{
		{"WithKeyPrefix", WithKeyPrefix("p:"), true, true},
		{"WithQueue", WithQueue(1, OldestFirst), true, true},
		{"WithMeterProvider", WithMeterProvider(sdkmetric.NewMeterProvider()), true, true},
		{"WithHooks", WithHooks(), true, true},
		{"WithDenyList", WithDenyList(dl, "id"), true, false},
		{"WithUpdateTimeout", WithUpdateTimeout(time.Second), true, false},
		{"WithKeyedDenyList", WithKeyedDenyList(dl, nil), false, true},
		{"WithMaxKeys", WithMaxKeys(1), false, true},
		{"WithIdleTimeout", WithIdleTimeout(time.Second), false, true},
		{"WithPolicyVersion", WithPolicyVersion(1), false, true},
	}
	for _, tt := range tests {
		_, limiter := tt.opt.(Option)
		_, keyed := tt.opt.(KeyedOption)
		if limiter != tt.limiter || keyed != tt.keyed {
			t.Errorf("%s: Option %v, KeyedOption %v; want %v, %v", tt.name, limiter, keyed, tt.limiter, tt.keyed)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for v, want := range map[interface{ String() string }]string{
		Adopt:          "adopt",
		Migrate:        "migrate",
		UpdateMode(0):  "UpdateMode(0)",
		UpdateMode(9):  "UpdateMode(9)",
		OldestFirst:    "oldest_first",
		NewestFirst:    "newest_first",
		QueueOrder(-1): "QueueOrder(-1)",
		QueueOrder(7):  "QueueOrder(7)",
	} {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
}

// The shared conditions are luakit's values, so one errors.Is check works across modules.
func TestSharedErrorsAreLuakits(t *testing.T) {
	for name, pair := range map[string][2]error{
		"ErrInvalidConfig": {ErrInvalidConfig, luakit.ErrInvalidConfig},
		"ErrForeignData":   {ErrForeignData, luakit.ErrForeignData},
		"ErrUncertain":     {ErrUncertain, luakit.ErrUncertain},
		"ErrClosed":        {ErrClosed, luakit.ErrClosed},
		"ErrNilClient":     {ErrNilClient, luakit.ErrNilClient},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s is not luakit's value", name)
		}
	}
	for _, err := range []error{ErrInvalidPolicy, ErrInvalidUpdate, ErrNegativePermits, ErrEmptyIdentity} {
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v does not match ErrInvalidConfig", err)
		}
	}
}
