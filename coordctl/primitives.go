package coordctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/spf13/cobra"

	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/latch"
	"github.com/coordkit/coordkit/leader"
	"github.com/coordkit/coordkit/lease"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/rwlock"
	"github.com/coordkit/coordkit/semaphore"
)

// primitive is one `coordctl <name> ...` command: its inspection and its admin actions.
type primitive struct {
	name, short string
	arg         string // the inspection's argument, for usage lines
	inspect     func(ctx context.Context, a *app, c rueidis.Client, key string) (view, error)
	policy      bool // the inspection takes --policy (ratelimit)
	admin       []admin
}

// admin is one state-changing action. describe states, before any I/O, what it would change; run
// does it and returns what it changed.
type admin struct {
	use, short string
	args       []string // argument names
	describe   func(a *app, args []string) string
	run        func(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error)
}

// change is the JSON (and table) report of an admin action.
type change struct {
	Primitive string `json:"primitive"`
	Action    string `json:"action"`
	Key       string `json:"key"`
	Changed   bool   `json:"changed"`
	What      string `json:"what"`
	Before    any    `json:"before"`
}

func (c change) rows() [][2]string {
	return [][2]string{{"action", c.Primitive + " " + c.Action}, {"key", quote(c.Key)},
		{"changed", yesno(c.Changed)}, {"what", c.What}}
}

func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("%s needs %d argument(s) %v, got %d", cmd.CommandPath(), len(names), names, len(args))
		}
		for i, s := range args {
			if s == "" {
				return usagef("%s: %s is empty", cmd.CommandPath(), names[i])
			}
		}
		return nil
	}
}

func (a *app) primitiveCommand(p primitive) *cobra.Command {
	cmd := &cobra.Command{
		Use:   p.name,
		Short: p.short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("%s: a subcommand is required (inspect%s)", cmd.CommandPath(), adminNames(p))
		},
	}
	insp := &cobra.Command{
		Use:   "inspect " + p.arg,
		Short: "show the state of one " + p.name + " (read-only)",
		Args:  exactArgs(p.arg),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.inspectOnce(cmd.Context(), p, args[0])
			if err != nil {
				return err
			}
			return a.render(a.out, v)
		},
	}
	if p.policy {
		a.policyFlag(insp)
	}
	cmd.AddCommand(insp)
	for _, ad := range p.admin {
		var yes bool
		sub := &cobra.Command{
			Use:   ad.use,
			Short: ad.short + " (changes state: needs --yes)",
			Args:  exactArgs(ad.args...),
			RunE: func(cmd *cobra.Command, args []string) error {
				if err := a.checkPolicy(p); err != nil {
					return err
				}
				if !yes {
					return usagef("refusing to change state without --yes: %s would %s", cmd.CommandPath(), ad.describe(a, args))
				}
				c, err := a.connect(cmd.Context())
				if err != nil {
					return err
				}
				ch, err := ad.run(cmd.Context(), a, c, args)
				if err != nil {
					return err
				}
				return a.render(a.out, ch)
			},
		}
		sub.Flags().BoolVar(&yes, "yes", false, "really change the state")
		if p.policy {
			a.policyFlag(sub)
		}
		cmd.AddCommand(sub)
	}
	return cmd
}

func adminNames(p primitive) string {
	s := ""
	for _, ad := range p.admin {
		s += ", " + ad.use[:len(ad.use)-len(" "+joinArgs(ad.args))]
	}
	return s
}

func joinArgs(args []string) string {
	s := ""
	for i, x := range args {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

// inspectOnce connects (first time) and runs one inspection bounded by --timeout.
func (a *app) inspectOnce(ctx context.Context, p primitive, key string) (view, error) {
	if err := a.checkPolicy(p); err != nil {
		return nil, err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	return p.inspect(cctx, a, c, key)
}

func (a *app) key(k string) string { return luakit.NewKeyspace(a.prefix).Key(k) }

func primitives() []primitive {
	return []primitive{
		{name: "lock", short: "fenced locks (module lock)", arg: "<name>", inspect: inspectLock, admin: []admin{{
			use: "force-release <name>", short: "delete the lease of a lock whoever holds it; the fence counter stays",
			args: []string{"<name>"},
			describe: func(a *app, args []string) string {
				lk, _ := lock.Keys(args[0])
				return fmt.Sprintf("delete the lease key %q of lock %q whoever holds it (the fence key is kept)", a.key(lk), args[0])
			},
			run: forceReleaseLock,
		}}},
		{name: "lease", short: "named leases in a hash (module lease)", arg: "<hash-key>", inspect: inspectLease, admin: []admin{{
			use: "force-release <hash-key> <field>", short: "delete one named lease whoever holds it",
			args: []string{"<hash-key>", "<field>"},
			describe: func(a *app, args []string) string {
				return fmt.Sprintf("delete the lease %q of hash %q whoever holds it", args[1], a.key(args[0]))
			},
			run: forceReleaseLease,
		}}},
		{name: "rwlock", short: "read-write locks (module rwlock)", arg: "<key>", inspect: inspectRWLock},
		{name: "semaphore", short: "counting semaphores (module semaphore)", arg: "<key>", inspect: inspectSemaphore},
		{name: "latch", short: "countdown latches (module latch)", arg: "<key>", inspect: inspectLatch, admin: []admin{{
			use: "delete <key>", short: "delete the latch's current generation; its waiters return ErrReplaced",
			args: []string{"<key>"},
			describe: func(a *app, args []string) string {
				return fmt.Sprintf("delete the latch %q (its current generation, whatever its state)", a.key(args[0]))
			},
			run: deleteLatch,
		}}},
		{name: "ratelimit", short: "rate limits: a key's state for a policy (module ratelimit)", arg: "<key>", inspect: inspectRate, policy: true,
			admin: []admin{{
				use: "reset <key>", short: "delete a key's rate-limit state: back at full capacity for every process",
				args: []string{"<key>"},
				describe: func(a *app, args []string) string {
					return fmt.Sprintf("delete the rate-limit state at %q (back at full capacity)", a.key(args[0]))
				},
				run: resetRate,
			}}},
		{name: "denylist", short: "ratelimit deny lists (module ratelimit)", arg: "<deny-list-key>", inspect: inspectDenyList, admin: []admin{{
			use: "deny <deny-list-key> <identity>", short: "add an identity to the deny list",
			args: []string{"<deny-list-key>", "<identity>"},
			describe: func(a *app, args []string) string {
				return fmt.Sprintf("add %q to the deny list %q", args[1], a.key(args[0]))
			},
			run: setDenied(true),
		}, {
			use: "allow <deny-list-key> <identity>", short: "remove an identity from the deny list",
			args: []string{"<deny-list-key>", "<identity>"},
			describe: func(a *app, args []string) string {
				return fmt.Sprintf("remove %q from the deny list %q", args[1], a.key(args[0]))
			},
			run: setDenied(false),
		}}},
		{name: "counter", short: "counters (module counter)", arg: "<key>", inspect: inspectCounter},
		{name: "leader", short: "leader elections (module leader)", arg: "<name>", inspect: inspectLeader},
		{name: "idempotency", short: "idempotency claims (module idempotency)", arg: "<key>", inspect: inspectIdempotency, admin: []admin{{
			use: "abandon <key>", short: "remove a pending (stuck) claim whoever owns it; a stored result is never removed",
			args: []string{"<key>"},
			describe: func(a *app, args []string) string {
				return fmt.Sprintf("remove the pending claim at %q whoever owns it (a completed result is kept)", a.key(args[0]))
			},
			run: abandonClaim,
		}}},
	}
}

// --- lock

type lockView struct {
	Primitive    string       `json:"primitive"`
	Name         string       `json:"name"`
	LeaseKey     string       `json:"lease_key"`
	FenceKey     string       `json:"fence_key"`
	Exists       bool         `json:"exists"`
	RemainingMS  int64        `json:"remaining_ms"`
	FencingToken int64        `json:"fencing_token"`
	Queued       int          `json:"queued"`  // waiters of the fair lock (lock.FairLocker) on this name
	Waiters      []waiterView `json:"waiters"` // the first of them, oldest first
}

// waiterView is one entry of a fair lock's queue (no owner token).
type waiterView struct {
	TTLMS       int64 `json:"ttl_ms"`
	SliceMS     int64 `json:"slice_ms"`
	Live        bool  `json:"live"`
	RemainingMS int64 `json:"remaining_ms"`
}

func (v lockView) rows() [][2]string {
	r := "-"
	if v.Exists {
		r = human(v.RemainingMS)
	}
	rows := [][2]string{{"lock", quote(v.Name)}, {"lease key", quote(v.LeaseKey)}, {"fence key", quote(v.FenceKey)},
		{"held", yesno(v.Exists)}, {"remaining", r}, {"fencing token", itoa(v.FencingToken)}, {"queued", strconv.Itoa(v.Queued)}}
	for i, w := range v.Waiters {
		state := "not live (skipped by the next release)"
		if w.Live {
			state = "live for " + human(w.RemainingMS)
		}
		rows = append(rows, [2]string{fmt.Sprintf("waiter %d", i+1), fmt.Sprintf("ttl %s, slice %s, %s", human(w.TTLMS), human(w.SliceMS), state)})
	}
	return rows
}

func lockerOf(a *app, c rueidis.Client) (*lock.Locker, error) {
	return lock.New(c, lock.WithKeyPrefix(a.prefix))
}

func inspectLock(ctx context.Context, a *app, c rueidis.Client, name string) (view, error) {
	// The fair lock's inspection: the plain lock's, plus the queue of fair waiters (empty for a name
	// only plain Lockers use).
	fl, err := lock.NewFair(c, lock.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	in, err := fl.Inspect(ctx, name)
	if err != nil {
		return nil, err
	}
	lease, fence := lock.Keys(name)
	v := lockView{Primitive: "lock", Name: name, LeaseKey: a.key(lease), FenceKey: a.key(fence),
		Exists: in.Exists, RemainingMS: msOrNoExpiry(in.Remaining, in.NoExpiry), FencingToken: in.FencingToken,
		Queued: in.Queued, Waiters: []waiterView{}}
	for _, w := range in.Waiters {
		v.Waiters = append(v.Waiters, waiterView{TTLMS: w.TTL.Milliseconds(), SliceMS: w.Slice.Milliseconds(), Live: w.Live, RemainingMS: w.Remaining.Milliseconds()})
	}
	return v, nil
}

func forceReleaseLock(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	v, err := inspectLock(ctx, a, c, args[0])
	if err != nil {
		return change{}, err
	}
	lk, err := lockerOf(a, c)
	if err != nil {
		return change{}, err
	}
	before := v.(lockView)
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	ok, err := lk.ForceRelease(cctx, args[0])
	if err != nil {
		return change{}, err
	}
	ch := change{Primitive: "lock", Action: "force-release", Key: before.LeaseKey, Changed: ok, Before: before}
	if ok {
		ch.What = fmt.Sprintf("deleted the lease key (it had %s left); fence key kept at %d", human(before.RemainingMS), before.FencingToken)
	} else {
		ch.What = "nothing: the lock was not held"
	}
	return ch, nil
}

// --- lease

type holderView struct {
	Field       string `json:"field"`
	RemainingMS int64  `json:"remaining_ms"`
}

type leaseView struct {
	Primitive string       `json:"primitive"`
	Key       string       `json:"key"`
	Exists    bool         `json:"exists"`
	Holders   []holderView `json:"holders"`
}

func (v leaseView) rows() [][2]string {
	r := [][2]string{{"hash", quote(v.Key)}, {"holders", itoa(int64(len(v.Holders)))}}
	for _, h := range v.Holders {
		r = append(r, [2]string{"  " + quote(h.Field), human(h.RemainingMS)})
	}
	return r
}

func inspectLease(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	ls, err := lease.New(c, lease.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	in, err := ls.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	v := leaseView{Primitive: "lease", Key: a.key(key), Exists: in.Exists, Holders: []holderView{}}
	for _, h := range in.Holders {
		v.Holders = append(v.Holders, holderView{Field: h.Field, RemainingMS: msOrNoExpiry(h.Remaining, h.NoExpiry)})
	}
	return v, nil
}

func forceReleaseLease(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	ls, err := lease.New(c, lease.WithKeyPrefix(a.prefix))
	if err != nil {
		return change{}, err
	}
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	ok, err := ls.ForceRelease(cctx, args[0], args[1])
	if err != nil {
		return change{}, err
	}
	ch := change{Primitive: "lease", Action: "force-release", Key: a.key(args[0]), Changed: ok,
		Before: map[string]string{"field": args[1]}}
	if ok {
		ch.What = fmt.Sprintf("deleted the lease field %q", args[1])
	} else {
		ch.What = fmt.Sprintf("nothing: no lease field %q", args[1])
	}
	return ch, nil
}

// --- rwlock

type rwlockView struct {
	Primitive          string  `json:"primitive"`
	Key                string  `json:"key"`
	Exists             bool    `json:"exists"`
	Mode               string  `json:"mode"`
	Readers            int     `json:"readers"`
	ReadersRemainingMS []int64 `json:"readers_remaining_ms"`
	WriterRemainingMS  int64   `json:"writer_remaining_ms"`
	KeyRemainingMS     int64   `json:"key_remaining_ms"`
}

func (v rwlockView) rows() [][2]string {
	w := "-"
	if v.Mode == "write" {
		w = human(v.WriterRemainingMS)
	}
	return [][2]string{{"rwlock", quote(v.Key)}, {"mode", v.Mode}, {"readers", itoa(int64(v.Readers))},
		{"readers remaining", humanList(v.ReadersRemainingMS)}, {"writer remaining", w},
		{"key remaining", human(v.KeyRemainingMS)}}
}

func inspectRWLock(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	l, err := rwlock.New(c, rwlock.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	in, err := l.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	v := rwlockView{Primitive: "rwlock", Key: a.key(key), Exists: in.Exists, Mode: "free", Readers: len(in.Readers),
		ReadersRemainingMS: []int64{}, KeyRemainingMS: ms(in.Remaining)}
	if in.Mode != 0 {
		v.Mode = in.Mode.String()
	}
	for _, r := range in.Readers {
		v.ReadersRemainingMS = append(v.ReadersRemainingMS, ms(r))
	}
	if in.Mode == rwlock.Write {
		v.WriterRemainingMS = ms(in.Writer)
	}
	return v, nil
}

// --- semaphore

type semaphoreView struct {
	Primitive          string  `json:"primitive"`
	Key                string  `json:"key"`
	Exists             bool    `json:"exists"`
	Capacity           int64   `json:"capacity"`
	Active             int     `json:"active"`
	Free               int64   `json:"free"`
	PermitsRemainingMS []int64 `json:"permits_remaining_ms"`
	KeyRemainingMS     int64   `json:"key_remaining_ms"`
}

func (v semaphoreView) rows() [][2]string {
	if !v.Exists {
		return [][2]string{{"semaphore", quote(v.Key)}, {"found", "no (no permit held, no capacity stored)"}}
	}
	return [][2]string{{"semaphore", quote(v.Key)}, {"capacity", itoa(v.Capacity)}, {"active", itoa(int64(v.Active))},
		{"free", itoa(v.Free)}, {"permits remaining", humanList(v.PermitsRemainingMS)}, {"key remaining", human(v.KeyRemainingMS)}}
}

func inspectSemaphore(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	// Inspect reports the stored capacity: the Semaphore's own (1) is not used.
	sem, err := semaphore.New(c, key, 1, semaphore.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	in, err := sem.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	v := semaphoreView{Primitive: "semaphore", Key: a.key(key), Exists: in.Exists, Capacity: in.Capacity,
		Active: len(in.Permits), Free: in.Free, PermitsRemainingMS: []int64{}}
	if in.Exists {
		v.KeyRemainingMS = msOrNoExpiry(in.Remaining, in.NoExpiry)
	}
	for _, p := range in.Permits {
		v.PermitsRemainingMS = append(v.PermitsRemainingMS, msOrNoExpiry(p.Remaining, p.NoExpiry))
	}
	return v, nil
}

// --- latch

type latchView struct {
	Primitive   string `json:"primitive"`
	Key         string `json:"key"`
	Exists      bool   `json:"exists"`
	Status      string `json:"status"`
	Generation  string `json:"generation"`
	Count       int64  `json:"count"`
	Initial     int64  `json:"initial"`
	Reason      string `json:"reason,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	RemainingMS int64  `json:"remaining_ms"`
}

func (v latchView) rows() [][2]string {
	if v.Status == "absent" {
		return [][2]string{{"latch", quote(v.Key)}, {"status", "absent"}}
	}
	exp, rem := "none", "-"
	if v.ExpiresAt != "" {
		exp, rem = v.ExpiresAt, human(v.RemainingMS)
	}
	r := [][2]string{{"latch", quote(v.Key)}, {"status", v.Status}, {"generation", v.Generation},
		{"count", itoa(v.Count) + " of " + itoa(v.Initial)}, {"expires at", exp}, {"remaining", rem}}
	if v.Status == "aborted" {
		r = append(r, [2]string{"reason", quote(v.Reason)})
	}
	return r
}

func latchesOf(a *app, c rueidis.Client) (*latch.Latches, error) {
	return latch.New(c, latch.WithKeyPrefix(a.prefix))
}

func inspectLatch(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	ls, err := latchesOf(a, c)
	if err != nil {
		return nil, err
	}
	in, err := ls.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	v := latchView{Primitive: "latch", Key: a.key(key), Exists: in.Exists, Status: string(in.Status),
		Generation: in.Generation, Count: in.Count, Initial: in.Initial, Reason: in.Reason}
	if !in.Exists {
		v.Status = "absent"
	}
	if !in.ExpiresAt.IsZero() {
		v.ExpiresAt, v.RemainingMS = in.ExpiresAt.UTC().Format(time.RFC3339Nano), ms(in.Remaining)
	}
	return v, nil
}

func deleteLatch(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	v, err := inspectLatch(ctx, a, c, args[0])
	if err != nil {
		return change{}, err
	}
	before := v.(latchView)
	ch := change{Primitive: "latch", Action: "delete", Key: before.Key, Before: before}
	if before.Status == "absent" {
		ch.What = "nothing: no latch at the key"
		return ch, nil
	}
	ls, err := latchesOf(a, c)
	if err != nil {
		return change{}, err
	}
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	ok, err := ls.ForceDelete(cctx, args[0], before.Generation)
	if err != nil {
		return change{}, err
	}
	ch.Changed = ok
	if ok {
		ch.What = fmt.Sprintf("deleted generation %s (%s, count %d of %d); its waiters return ErrReplaced",
			before.Generation, before.Status, before.Count, before.Initial)
	} else {
		ch.What = "nothing: the latch was replaced or deleted since it was read"
	}
	return ch, nil
}

// --- counter

type counterView struct {
	Primitive   string `json:"primitive"`
	Key         string `json:"key"`
	Exists      bool   `json:"exists"`
	Value       int64  `json:"value"`
	RemainingMS int64  `json:"remaining_ms"`
}

func (v counterView) rows() [][2]string {
	t := "-"
	if v.Exists {
		t = human(v.RemainingMS)
	}
	return [][2]string{{"counter", quote(v.Key)}, {"exists", yesno(v.Exists)}, {"value", itoa(v.Value)}, {"remaining", t}}
}

func inspectCounter(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	s, err := counter.New(c, counter.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	in, err := s.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	return counterView{Primitive: "counter", Key: a.key(key), Exists: in.Exists, Value: in.Value,
		RemainingMS: msOrNoExpiry(in.Remaining, in.NoExpiry)}, nil
}

// --- leader

type leaderView struct {
	Primitive    string `json:"primitive"`
	Name         string `json:"name"`
	LeaseKey     string `json:"lease_key"`
	Exists       bool   `json:"exists"`
	RemainingMS  int64  `json:"remaining_ms"`
	FencingToken int64  `json:"fencing_token"`
}

func (v leaderView) rows() [][2]string {
	r := "-"
	if v.Exists {
		r = human(v.RemainingMS)
	}
	return [][2]string{{"election", quote(v.Name)}, {"lease key", quote(v.LeaseKey)}, {"leader present", yesno(v.Exists)},
		{"remaining", r}, {"fencing token", itoa(v.FencingToken)}}
}

func inspectLeader(ctx context.Context, a *app, c rueidis.Client, name string) (view, error) {
	el, err := leader.New(c, name, leader.WithKeyPrefix(a.prefix))
	if err != nil {
		return nil, err
	}
	in, err := el.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	return leaderView{Primitive: "leader", Name: name, LeaseKey: a.key(el.LeaseKey()), Exists: in.Exists,
		RemainingMS: msOrNoExpiry(in.Remaining, in.NoExpiry), FencingToken: in.FencingToken}, nil
}

// --- idempotency

type idempotencyView struct {
	Primitive   string `json:"primitive"`
	Key         string `json:"key"`
	Exists      bool   `json:"exists"`
	State       string `json:"state"`
	Generation  int64  `json:"generation"`
	TTLMS       int64  `json:"ttl_ms"`
	RemainingMS int64  `json:"remaining_ms"`
	ResultSize  int64  `json:"result_size"`
}

func (v idempotencyView) rows() [][2]string {
	if !v.Exists {
		return [][2]string{{"claim", quote(v.Key)}, {"state", "absent"}}
	}
	return [][2]string{{"claim", quote(v.Key)}, {"state", v.State}, {"generation", itoa(v.Generation)},
		{"ttl", human(v.TTLMS)}, {"remaining", human(v.RemainingMS)}, {"result size", itoa(v.ResultSize) + " bytes"}}
}

func storeOf(a *app, c rueidis.Client) (*idempotency.Store, error) {
	return idempotency.New(c, idempotency.WithKeyPrefix(a.prefix))
}

func inspectIdempotency(ctx context.Context, a *app, c rueidis.Client, key string) (view, error) {
	s, err := storeOf(a, c)
	if err != nil {
		return nil, err
	}
	in, err := s.Inspect(ctx, key)
	if err != nil {
		return nil, err
	}
	v := idempotencyView{Primitive: "idempotency", Key: a.key(key), Exists: in.Exists, State: "absent"}
	if in.Exists {
		v.State, v.Generation, v.TTLMS, v.RemainingMS, v.ResultSize = stateName(in.State), in.Generation,
			ms(in.TTL), ms(in.Remaining), in.ResultSize
	}
	return v, nil
}

func stateName(s idempotency.State) string {
	if s == idempotency.Completed {
		return "completed"
	}
	return "pending"
}

func abandonClaim(ctx context.Context, a *app, c rueidis.Client, args []string) (change, error) {
	v, err := inspectIdempotency(ctx, a, c, args[0])
	if err != nil {
		return change{}, err
	}
	before := v.(idempotencyView)
	ch := change{Primitive: "idempotency", Action: "abandon", Key: before.Key, Before: before}
	switch before.State {
	case "absent":
		ch.What = "nothing: no claim at the key"
		return ch, nil
	case "completed":
		return change{}, errors.New("idempotency abandon: the claim is completed; a stored result is never removed")
	}
	s, err := storeOf(a, c)
	if err != nil {
		return change{}, err
	}
	cctx, cancel := a.roundTrip(ctx)
	defer cancel()
	ok, err := s.ForceAbandon(cctx, args[0], before.Generation)
	if err != nil {
		return change{}, err
	}
	ch.Changed = ok
	if ok {
		ch.What = fmt.Sprintf("removed the pending claim of generation %d (%s of its lease left)", before.Generation, human(before.RemainingMS))
	} else {
		ch.What = "nothing: the claim completed, expired or was replaced since it was read"
	}
	return ch, nil
}

// checkPolicy validates --policy before any I/O for a primitive that takes one.
func (a *app) checkPolicy(p primitive) error {
	if !p.policy {
		return nil
	}
	if a.policy == "" {
		return usagef("%s needs --policy (%s)", p.name, policyHelp)
	}
	_, err := parsePolicy(a.policy)
	return err
}
