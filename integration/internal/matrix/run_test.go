package matrix

import (
	"strings"
	"testing"
)

func TestCheckNames(t *testing.T) {
	tests := []struct {
		names []string
		dup   string // "" when the names are numbered once
	}{
		{nil, ""},
		{[]string{"01_a", "02_b", "engine_keys", "90_acl"}, ""},
		{[]string{"11_a", "12_b", "11_c"}, "number 11 (11_a, 11_c)"},
		{[]string{"025_a", "25_b"}, "number 25 (025_a, 25_b)"},
		{[]string{"x_1", "y_1"}, ""},
		{[]string{"engine_keys", "engine_keys"}, "name engine_keys"},
	}
	for _, tt := range tests {
		err := CheckNames(tt.names)
		switch {
		case tt.dup == "" && err != nil:
			t.Errorf("CheckNames(%q) = %v, want nil", tt.names, err)
		case tt.dup != "" && (err == nil || !strings.Contains(err.Error(), tt.dup)):
			t.Errorf("CheckNames(%q) = %v, want an error naming %s", tt.names, err, tt.dup)
		}
	}
}

func TestSelectStandalone(t *testing.T) {
	all := []Target{{Name: "redis8"}, {Name: "redis-cluster", Cluster: true}, {Name: "redis-sentinel", Sentinel: true}}
	if got := names(Select(all, Target.Standalone)); got != "redis8" {
		t.Fatalf("Select(Standalone) = %s, want redis8", got)
	}
}
