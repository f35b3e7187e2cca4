package coordctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/ratelimit"
	"github.com/coordkit/coordkit/ratelimit/denylist"
)

// policyHelp documents --policy's syntax; it must be the policy the application uses (a different
// one fails with ratelimit's ErrConfigMismatch or reads the state under other settings).
const policyHelp = "the application's policy: fixed:LIMIT/WINDOW, sliding:LIMIT/WINDOW[/SEGMENTS], " +
	"token:LIMIT/TOKENS/PERIOD or gcra:BURST/INTERVAL (durations as 1s, 500ms)"

// parsePolicy turns a --policy value into a ratelimit.Policy; ratelimit validates its ranges.
func parsePolicy(spec string) (ratelimit.Policy, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok || rest == "" {
		return nil, usagef("--policy %q: want KIND:ARGS (%s)", spec, policyHelp)
	}
	parts := strings.Split(rest, "/")
	ints := func(i int) (int64, error) {
		v, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return 0, usagef("--policy %q: %q is not an integer", spec, parts[i])
		}
		return v, nil
	}
	dur := func(i int) (time.Duration, error) {
		d, err := time.ParseDuration(parts[i])
		if err != nil {
			return 0, usagef("--policy %q: %q is not a duration", spec, parts[i])
		}
		return d, nil
	}
	want := map[string][]int{"fixed": {2}, "sliding": {2, 3}, "token": {3}, "gcra": {2}}[kind]
	if want == nil {
		return nil, usagef("--policy %q: unknown kind %q (%s)", spec, kind, policyHelp)
	}
	if !containsInt(want, len(parts)) {
		return nil, usagef("--policy %q: %s takes %v values, got %d", spec, kind, want, len(parts))
	}
	switch kind {
	case "fixed", "sliding":
		limit, err := ints(0)
		if err != nil {
			return nil, err
		}
		window, err := dur(1)
		if err != nil {
			return nil, err
		}
		if kind == "fixed" {
			return ratelimit.FixedWindow{Limit: limit, Window: window}, nil
		}
		p := ratelimit.SlidingWindow{Limit: limit, Window: window}
		if len(parts) == 3 {
			seg, err := ints(2)
			if err != nil {
				return nil, err
			}
			p.Segments = int(seg)
		}
		return p, nil
	case "token":
		limit, err := ints(0)
		if err != nil {
			return nil, err
		}
		tokens, err := ints(1)
		if err != nil {
			return nil, err
		}
		period, err := dur(2)
		if err != nil {
			return nil, err
		}
		return ratelimit.TokenBucket{Limit: limit, TokensPerPeriod: tokens, Period: period}, nil
	default:
		burst, err := ints(0)
		if err != nil {
			return nil, err
		}
		iv, err := dur(1)
		if err != nil {
			return nil, err
		}
		return ratelimit.GCRA{Burst: burst, EmissionInterval: iv}, nil
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

type rateView struct {
	Primitive    string `json:"primitive"`
	Key          string `json:"key"`
	Policy       string `json:"policy"`
	Exists       bool   `json:"exists"`
	Remaining    int64  `json:"remaining"`
	Limit        int64  `json:"limit"`
	ResetMS      int64  `json:"reset_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAt      string `json:"reset_at"`
	Component    int    `json:"component"`
}

func (v rateView) rows() [][2]string {
	return [][2]string{{"rate limit", quote(v.Key)}, {"policy", v.Policy}, {"exists", strconv.FormatBool(v.Exists)}, {"remaining", itoa(v.Remaining) + " of " + itoa(v.Limit)},
		{"reset in", human(v.ResetMS)}, {"retry after", human(v.RetryAfterMS)}, {"reset at", v.ResetAt},
		{"component", strconv.Itoa(v.Component)}}
}

// inspectRate is the ratelimit primitive's inspection (Keyed.Inspect, one read-only script); the
// policy comes from --policy.
func inspectRate(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	if a.policy == "" {
		return nil, usagef("ratelimit needs --policy (%s)", policyHelp)
	}
	p, err := parsePolicy(a.policy)
	if err != nil {
		return nil, err
	}
	k, err := ratelimit.NewKeyed(c, p, ratelimit.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, usagef("--policy %q: %v", a.policy, err)
	}
	defer k.Close(context.WithoutCancel(ctx))
	in, err := k.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	return rateView{Primitive: "ratelimit", Key: a.key(key), Policy: a.policy, Exists: in.Exists, Remaining: in.Remaining, Limit: in.Limit,
		ResetMS: in.Reset.Milliseconds(), RetryAfterMS: in.RetryAfter.Milliseconds(),
		ResetAt: in.ResetAt().UTC().Format(time.RFC3339Nano), Component: in.Component}, nil
}

type denyView struct {
	Primitive   string   `json:"primitive"`
	Key         string   `json:"key"`
	Exists      bool     `json:"exists"`
	RemainingMS int64    `json:"remaining_ms"` // the key's; -1: no expiry
	Identities  []string `json:"identities"`
}

func (v denyView) rows() [][2]string {
	rem := "no expiry"
	if v.RemainingMS >= 0 {
		rem = human(v.RemainingMS)
	}
	r := [][2]string{{"deny list", quote(v.Key)}, {"identities", itoa(int64(len(v.Identities)))}, {"remaining", rem}}
	for _, id := range v.Identities {
		r = append(r, [2]string{"  " + quote(id), "denied"})
	}
	return r
}

func denyListOf(a *app, c rueidis.Client, key string) (*denylist.List, error) {
	return denylist.New(c, key, denylist.WithKeyPrefix(a.prefix))
}

func inspectDenyList(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	d, err := denyListOf(a, c, key)
	if err != nil {
		return nil, err
	}
	defer d.Close(context.WithoutCancel(ctx))
	ins, err := d.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	ids := ins.Identities
	if ids == nil {
		ids = []string{}
	}
	return denyView{Primitive: "denylist", Key: a.key(key), Exists: ins.Exists,
		RemainingMS: msOrNoExpiry(ins.Remaining, ins.NoExpiry), Identities: ids}, nil
}

// setDenied is the deny and allow admin actions (denylist.List.SetDenied).
func setDenied(denied bool) func(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	return func(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
		d, err := denyListOf(a, c, args[0])
		if err != nil {
			return change{}, err
		}
		defer d.Close(context.WithoutCancel(ctx))
		cctx, cancel := a.roundTrip(ctx)
		defer cancel()
		was, err := d.IsDenied(cctx, args[1])
		if err != nil {
			return change{}, err
		}
		action := map[bool]string{true: "deny", false: "allow"}[denied]
		ch := change{Primitive: "ratelimit", Action: action, Key: a.key(args[0]), Before: map[string]any{"identity": args[1], "denied": was}}
		if was == denied {
			ch.What = fmt.Sprintf("nothing: %q was already %s", args[1], map[bool]string{true: "denied", false: "not denied"}[denied])
			return ch, nil
		}
		if err := d.SetDenied(cctx, args[1], denied); err != nil {
			return change{}, err
		}
		ch.Changed = true
		if denied {
			ch.What = fmt.Sprintf("added %q to the deny list", args[1])
		} else {
			ch.What = fmt.Sprintf("removed %q from the deny list", args[1])
		}
		return ch, nil
	}
}

// rateCommandFlags adds --policy to the ratelimit inspect and watch commands.
func (a *app) policyFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.policy, "policy", "", policyHelp)
}

// resetRate is `ratelimit reset`: it inspects the key, then deletes its state (Keyed.Reset).
func resetRate(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	v, err := inspectRate(ctx, a, c, args[0])
	if err != nil {
		return change{}, err
	}
	before := v.(rateView)
	p, err := parsePolicy(a.policy)
	if err != nil {
		return change{}, err
	}
	k, err := ratelimit.NewKeyed(c, p, ratelimit.WithKeyPrefix(a.prefix))
	if err != nil {
		return change{}, usagef("--policy %q: %v", a.policy, err)
	}
	defer k.Close(context.WithoutCancel(ctx))
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	if err := k.Reset(cctx, args[0]); err != nil {
		return change{}, err
	}
	ch := change{Primitive: "ratelimit", Action: "reset", Key: before.Key, Changed: before.Remaining < before.Limit, Before: before}
	if ch.Changed {
		ch.What = fmt.Sprintf("deleted the key's state (%d of %d remaining); back at full capacity", before.Remaining, before.Limit)
	} else {
		ch.What = "nothing to reset: the key was at full capacity (any state there was deleted)"
	}
	return ch, nil
}
