package coordctl_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/coordctl"
)

// These tests need no server: usage errors are found before any I/O, and the unreachable-server case
// dials a closed port. Behaviour against real servers is in integration/coordctl.
func TestRunWithoutServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr ("" for none)
	}{
		{"help", []string{"--help"}, coordctl.ExitOK, ""},
		{"no primitive", nil, coordctl.ExitUsage, "a primitive is required"},
		{"unknown primitive", []string{"mutex", "inspect", "x"}, coordctl.ExitUsage, `unknown command "mutex"`},
		{"no subcommand", []string{"lock"}, coordctl.ExitUsage, "a subcommand is required (inspect, force-release)"},
		{"missing key", []string{"lock", "inspect"}, coordctl.ExitUsage, "needs 1 argument"},
		{"extra argument", []string{"counter", "inspect", "a", "b"}, coordctl.ExitUsage, "got 2"},
		{"empty key", []string{"counter", "inspect", ""}, coordctl.ExitUsage, "<key> is empty"},
		{"unknown flag", []string{"--colour", "lock", "inspect", "x"}, coordctl.ExitUsage, "unknown flag"},
		{"admin without --yes", []string{"lock", "force-release", "x"}, coordctl.ExitUsage, `would delete the lease key "{x}:lease"`},
		{"admin prefix shown", []string{"--prefix", "app:", "idempotency", "abandon", "k"}, coordctl.ExitUsage, `"app:k"`},
		{"lease admin needs field", []string{"lease", "force-release", "h", "--yes"}, coordctl.ExitUsage, "needs 2 argument"},
		{"watch unknown primitive", []string{"watch", "mutex", "x"}, coordctl.ExitUsage, `unknown primitive "mutex"`},
		{"watch interval", []string{"watch", "--interval", "1ms", "lock", "x"}, coordctl.ExitUsage, "at least 10ms"},
		{"bad scheme", []string{"--url", "http://u:pw1@h:1", "lock", "inspect", "x"}, coordctl.ExitUsage, "redis:// or rediss://"},
		{"bad port", []string{"--url", "redis://u:pw1@h:port", "lock", "inspect", "x"}, coordctl.ExitUsage, "invalid --url"},
		{"bad timeout", []string{"--timeout", "0s", "lock", "inspect", "x"}, coordctl.ExitUsage, "--timeout"},
		{"ratelimit without --policy", []string{"ratelimit", "inspect", "k"}, coordctl.ExitUsage, "needs --policy"},
		{"ratelimit bad policy", []string{"ratelimit", "inspect", "k", "--policy", "fixed:x/1m"}, coordctl.ExitUsage, "not an integer"},
		{"ratelimit unknown policy", []string{"ratelimit", "inspect", "k", "--policy", "leaky:1/1s"}, coordctl.ExitUsage, "unknown kind"},
		{"ratelimit policy arity", []string{"ratelimit", "inspect", "k", "--policy", "token:1/1s"}, coordctl.ExitUsage, "takes [3] values"},
		{"reset without --yes", []string{"ratelimit", "reset", "k", "--policy", "gcra:10/1s"}, coordctl.ExitUsage, `delete the rate-limit state at "k"`},
		{"reset without --policy", []string{"ratelimit", "reset", "k", "--yes"}, coordctl.ExitUsage, "needs --policy"},
		{"deny without --yes", []string{"denylist", "deny", "blocked", "mallory"}, coordctl.ExitUsage, `add "mallory" to the deny list "blocked"`},
		{"unreachable", []string{"--url", "redis://u:pw1@127.0.0.1:1", "--timeout", "1s", "counter", "inspect", "x"},
			coordctl.ExitFailure, "cannot connect to 127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := coordctl.Run(context.Background(), tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not contain %q", errb.String(), tc.want)
			}
			if strings.Contains(out.String()+errb.String(), "pw1") {
				t.Fatalf("the password was printed: %q %q", out.String(), errb.String())
			}
		})
	}
}

// TestRunCredentialsFromEnvironment: COORDCTL_URL is the default of --url and is never echoed.
func TestRunCredentialsFromEnvironment(t *testing.T) {
	t.Setenv(coordctl.EnvURL, "redis://u:pw2@127.0.0.1:1")
	t.Setenv(coordctl.EnvPassword, "pw3")
	var out, errb bytes.Buffer
	code := coordctl.Run(context.Background(), []string{"--timeout", "1s", "lock", "inspect", "x"}, &out, &errb)
	if code != coordctl.ExitFailure || !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if s := out.String() + errb.String(); strings.Contains(s, "pw2") || strings.Contains(s, "pw3") {
		t.Fatalf("a password was printed: %q", s)
	}
}
