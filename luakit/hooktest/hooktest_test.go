package hooktest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/luakit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRecorder(t *testing.T) {
	ctx := context.Background()
	op := func(name string) luakit.Operation {
		return luakit.Operation{Primitive: "lock", Name: name, Instance: "a"}
	}
	var r Recorder
	_, done, err := r.Admit(ctx, op("LOCK ACQUIRE"))
	if err != nil || done == nil {
		t.Fatalf("zero value must admit: %v", err)
	}
	done(luakit.OutcomeSucceeded, nil)
	r.Reject("LOCK RELEASE")
	if _, _, err := r.Admit(ctx, op("LOCK RELEASE")); !errors.Is(err, ErrRejected) {
		t.Fatalf("named rejection: %v", err)
	}
	if _, _, err := r.Admit(ctx, op("LOCK EXTEND")); err != nil {
		t.Fatalf("unnamed operation rejected: %v", err)
	}
	r.Reject()
	r.RejectAll(true)
	if _, _, err := r.Admit(ctx, op("LOCK EXTEND")); !errors.Is(err, ErrRejected) {
		t.Fatalf("RejectAll: %v", err)
	}
	want := []string{"admit LOCK ACQUIRE @a", "done LOCK ACQUIRE succeeded", "admit LOCK RELEASE @a",
		"admit LOCK EXTEND @a", "admit LOCK EXTEND @a"}
	if got := r.Take(); !slices.Equal(got, want) {
		t.Fatalf("journal = %q, want %q", got, want)
	}
	if got := r.Take(); got != nil {
		t.Fatalf("Take did not clear: %q", got)
	}
}
