package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantCode int
		want     []string
		notWant  []string
	}{
		{
			name: "all pass",
			in: `{"Action":"run","Package":"x/integration/lock","Test":"TestLock"}
{"Action":"output","Package":"x/integration/lock","Test":"TestLock/redis70/01","Output":"quiet\n"}
{"Action":"pass","Package":"x/integration/lock","Test":"TestLock/redis70/01"}
{"Action":"pass","Package":"x/integration/lock","Test":"TestLock/redis70"}
{"Action":"skip","Package":"x/integration/lock","Test":"TestLock/valkey8"}
{"Action":"pass","Package":"x/integration/lock","Test":"TestLock"}
{"Action":"pass","Package":"x/integration/lock","Elapsed":1.5}`,
			wantCode: 0,
			want:     []string{"ok  \tx/integration/lock\t1.500s", "lock           pass            -               skip"},
			notWant:  []string{"quiet"},
		},
		{
			name: "one target fails",
			in: `{"Action":"output","Package":"x/integration/lock","Test":"TestLock/redis-cluster/05","Output":"boom happened\n"}
{"Action":"fail","Package":"x/integration/lock","Test":"TestLock/redis-cluster/05"}
{"Action":"pass","Package":"x/integration/lock","Test":"TestLock/redis8/05"}
{"Action":"fail","Package":"x/integration/lock","Elapsed":2}`,
			wantCode: 1,
			want:     []string{"boom happened", "FAIL\tx/integration/lock", "FAIL"},
		},
		{
			name:     "build error passes through and fails",
			in:       "# x/integration/lock\nlock_test.go:1: syntax error\nFAIL\tx/integration/lock [build failed]",
			wantCode: 1,
			want:     []string{"syntax error", "(no matrix suites ran)"},
		},
		{
			name: "non-target subtests are not columns",
			in: `{"Action":"pass","Package":"x/integration/internal/matrix","Test":"TestTargets/redis8|"}
{"Action":"pass","Package":"x/integration/internal/matrix","Elapsed":0.1}`,
			wantCode: 0,
			want:     []string{"(no matrix suites ran)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			code := run(strings.NewReader(tt.in), &out, []string{"redis70", "redis8", "valkey8", "redis-cluster"}, "t", "")
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
