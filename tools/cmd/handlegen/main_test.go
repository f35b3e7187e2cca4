package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// generateLine matches a handle package's go:generate line for this command.
var generateLine = regexp.MustCompile(`(?m)^//go:generate go run \.\./tools/cmd/handlegen (.*)$`)

// TestCommittedFilesCurrent regenerates every handle package's methods from its go:generate line and
// compares them with the committed handle_methods.go: a template change or a new flag must be
// followed by `go generate` in each package.
func TestCommittedFilesCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, pkg := range []string{"lock", "lease", "rwlock", "semaphore", "redlock"} {
		t.Run(pkg, func(t *testing.T) {
			dir := filepath.Join(root, pkg)
			k := kindFrom(t, dir, pkg)
			want, err := Generate(k)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, FileName))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s/%s is not what handlegen writes: run go generate in %s", pkg, FileName, pkg)
			}
		})
	}
}

// kindFrom reads the flags of the one go:generate line for handlegen in dir's Go files.
func kindFrom(t *testing.T, dir, pkg string) Kind {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range generateLine.FindAllSubmatch(src, -1) {
			lines = append(lines, string(m[1]))
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%s: %d go:generate lines for handlegen, want 1", pkg, len(lines))
	}
	k := Kind{Package: pkg, Recv: "h", TTL: "whole milliseconds, at least 1ms"}
	args := splitArgs(lines[0])
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "-type":
			k.Type = args[i+1]
		case "-noun":
			k.Noun = args[i+1]
		case "-recv":
			k.Recv = args[i+1]
		case "-ttl":
			k.TTL = args[i+1]
		default:
			t.Fatalf("%s: unknown flag %q", pkg, args[i])
		}
	}
	return k
}

// splitArgs splits a go:generate argument list on spaces, keeping double-quoted words whole.
func splitArgs(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return append(out, s[1:])
			}
			out = append(out, s[1:end+1])
			s = s[end+2:]
			continue
		}
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			return append(out, s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{`-type Lease -noun lease`, []string{"-type", "Lease", "-noun", "lease"}},
		{`-type Permit -ttl "NoExpiry, or 1ms" -recv p`, []string{"-type", "Permit", "-ttl", "NoExpiry, or 1ms", "-recv", "p"}},
	} {
		got := splitArgs(tc.in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("splitArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
