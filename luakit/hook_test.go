package luakit

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// recorder is a Hook that logs admissions and completions into a shared journal.
type recorder struct {
	name   string
	log    *[]string
	reject error
}

type ctxKey string

func (r recorder) Admit(ctx context.Context, op Operation) (context.Context, Completion, error) {
	*r.log = append(*r.log, fmt.Sprintf("%s admit %s prev=%v", r.name, op.Name, ctx.Value(ctxKey("by"))))
	if r.reject != nil {
		return nil, nil, r.reject
	}
	return context.WithValue(ctx, ctxKey("by"), r.name), func(o HookOutcome, err error) {
		*r.log = append(*r.log, fmt.Sprintf("%s done %s %v", r.name, o, err))
	}, nil
}

func TestHooksCompose(t *testing.T) {
	errNo := errors.New("no")
	op := Operation{Primitive: "lock", Name: "LOCK ACQUIRE", Instance: "orders"}
	tests := []struct {
		name    string
		rejectB bool
		result  error
		cancel  bool
		want    []string
		wantErr error
	}{
		{name: "success", want: []string{
			"a admit LOCK ACQUIRE prev=<nil>", "b admit LOCK ACQUIRE prev=a", "c admit LOCK ACQUIRE prev=b",
			"c done succeeded <nil>", "b done succeeded <nil>", "a done succeeded <nil>"}},
		{name: "failure", result: errNo, want: []string{
			"a admit LOCK ACQUIRE prev=<nil>", "b admit LOCK ACQUIRE prev=a", "c admit LOCK ACQUIRE prev=b",
			"c done failed no", "b done failed no", "a done failed no"}},
		{name: "canceled", result: fmt.Errorf("x: %w", context.Canceled), cancel: true, want: []string{
			"a admit LOCK ACQUIRE prev=<nil>", "b admit LOCK ACQUIRE prev=a", "c admit LOCK ACQUIRE prev=b",
			"c done canceled x: context canceled", "b done canceled x: context canceled", "a done canceled x: context canceled"}},
		{name: "cancel error without ended ctx is a failure", result: context.Canceled, want: []string{
			"a admit LOCK ACQUIRE prev=<nil>", "b admit LOCK ACQUIRE prev=a", "c admit LOCK ACQUIRE prev=b",
			"c done failed context canceled", "b done failed context canceled", "a done failed context canceled"}},
		{name: "b rejects", rejectB: true, wantErr: errNo, want: []string{
			"a admit LOCK ACQUIRE prev=<nil>", "b admit LOCK ACQUIRE prev=a", "a done failed no"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			b := recorder{name: "b", log: &log}
			if tt.rejectB {
				b.reject = errNo
			}
			hs := Hooks{recorder{name: "a", log: &log}, nil, b, recorder{name: "c", log: &log}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			octx, sc, err := hs.Begin(ctx, op)
			if err != tt.wantErr { //nolint:errorlint // the rejection must come back unchanged
				t.Fatalf("Begin error %v, want %v", err, tt.wantErr)
			}
			if err == nil {
				if got := octx.Value(ctxKey("by")); got != "c" {
					t.Fatalf("operation context from %v, want the last hook's", got)
				}
				if tt.cancel {
					cancel()
				}
				sc.End(tt.result)
				sc.End(tt.result) // a second End reports nothing
			}
			if !reflect.DeepEqual(log, tt.want) {
				t.Fatalf("journal\n got %q\nwant %q", log, tt.want)
			}
		})
	}
}

func TestHooksNoneAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	op := Operation{Primitive: "lock", Name: "LOCK ACQUIRE"}
	for _, hs := range []Hooks{nil, {}} {
		if n := testing.AllocsPerRun(100, func() {
			c, sc, err := hs.Begin(ctx, op)
			_ = c
			sc.End(err)
		}); n != 0 {
			t.Fatalf("Begin/End with no hooks allocated %v times", n)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[HookOutcome]string{OutcomeSucceeded: "succeeded", OutcomeCanceled: "canceled", OutcomeFailed: "failed", 0: "HookOutcome(0)", 9: "HookOutcome(9)"} {
		if got := o.String(); got != want {
			t.Errorf("%d: %q, want %q", int(o), got, want)
		}
	}
}

func BenchmarkHooksNone(b *testing.B) {
	ctx := context.Background()
	op := Operation{Primitive: "lock", Name: "LOCK ACQUIRE"}
	var hs Hooks
	b.ReportAllocs()
	for b.Loop() {
		_, sc, err := hs.Begin(ctx, op)
		sc.End(err)
	}
}

// attemptSpy is a Hook that is also an AttemptObserver.
type attemptSpy struct{ errs []error }

func (s *attemptSpy) Admit(context.Context, Operation) (context.Context, Completion, error) {
	return nil, nil, nil
}

func (s *attemptSpy) ObserveAttempt(_ context.Context, err error) { s.errs = append(s.errs, err) }

// TestHooksAttempted: Attempted reaches every hook that is an AttemptObserver, skips the others and
// nil entries.
func TestHooksAttempted(t *testing.T) {
	spy := &attemptSpy{}
	boom := errors.New("boom")
	hs := Hooks{nil, HookFunc(func(ctx context.Context, _ Operation) (context.Context, Completion, error) { return ctx, nil, nil }), spy}
	hs.Attempted(context.Background(), nil)
	hs.Attempted(context.Background(), boom)
	if len(spy.errs) != 2 || spy.errs[0] != nil || spy.errs[1] != boom {
		t.Fatalf("observed %v, want [nil boom]", spy.errs)
	}
	Hooks(nil).Attempted(context.Background(), boom) // no hooks: nothing to do
}
