package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordkit/luakit"
)

// Forever is what [Handle.Remaining] returns for a held handle without expiry (granted with TTL 0 or
// moved there by [Handle.ExtendNoExpiry], offered only by the semaphore's permits).
const Forever time.Duration = math.MaxInt64

// Outcome is the result of [Handle.Release]. The zero value is not an outcome: Release returns it only
// together with an error.
type Outcome int

const (
	// Released means this call removed this owner's hold.
	Released Outcome = iota + 1
	// AlreadyReleased means an earlier answered release on this handle (Release, a module's Close, or the
	// surrender after a late renewal) already settled it, or the hold is absent after an earlier
	// uncertain Release; nothing was removed now.
	AlreadyReleased
	// NotOwned means the server holds nothing of this owner: it expired (and may have been taken by another
	// owner, whose hold is left intact) or was deleted externally.
	NotOwned
)

// String returns "released", "already_released" or "not_owned" ("Outcome(n)" otherwise).
func (o Outcome) String() string {
	switch o {
	case Released:
		return "released"
	case AlreadyReleased:
		return "already_released"
	case NotOwned:
		return "not_owned"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Backend is what a primitive supplies to a [Handle]: its owner-checked scripts for one hold. Each
// method sends one command (or, for redlock, one per node) and reports what the server said; the
// Handle does the bookkeeping. The ctx passed in carries no deadline (see [luakit.WithoutDeadline]), so
// backends should send with [luakit.Script.ExecOrdered] to keep a handle's commands in order on one
// connection. An error the server may have applied must classify as uncertain ([luakit.IsUncertain]) or
// wrap [luakit.ErrUncertain]; any other error means the script did not run. Return errors without the
// module's name or the operation: the Handle prefixes them ("lock: extend: ...").
type Backend interface {
	// Extend restarts this owner's hold at ttl (0: no expiry, where the primitive offers it), counted
	// on the server. held is false when the server holds nothing of this owner (nothing renewed).
	Extend(ctx context.Context, ttl time.Duration) (held bool, err error)
	// Verify reports whether this owner holds at this instant, without renewing.
	Verify(ctx context.Context) (held bool, err error)
	// Release removes this owner's hold; removed is false when there was none. Never touches another
	// owner's hold.
	Release(ctx context.Context) (removed bool, err error)
}

// Acknowledger is implemented by a [Backend] whose renewals can be acknowledged (Config.Ack).
type Acknowledger interface {
	// ExtendAcknowledged is Extend followed by the acknowledgement ack on the connection that ran the
	// renewal ([luakit.Script.ExecOrderedAck]): (true, nil) renewed and acknowledged; (true, err) with
	// a [*luakit.AckError]: renewed on the primary but not acknowledged; otherwise as Extend.
	ExtendAcknowledged(ctx context.Context, ttl time.Duration, ack luakit.ReplicaAck) (held bool, err error)
}

// Config is the per-primitive configuration shared by every handle of one factory (a Locker, a
// Semaphore, ...). It must not change once a handle uses it. The zero value of each field selects the
// default given.
type Config struct {
	// Name prefixes errors and log messages ("lock", "semaphore"). Default "coordkit".
	Name string
	// Margin, when set, is subtracted from every local deadline (redlock's clock-drift allowance):
	// deadline = send time + ttl − Margin(ttl). Default: none.
	Margin func(ttl time.Duration) time.Duration
	// RenewFraction is when [Handle.KeepAlive] renews: every RenewFraction × TTL. Default 1/3.
	RenewFraction float64
	// RetryDelay is how long KeepAlive waits after a failed renewal before trying again (capped at a
	// quarter of the renew period), and how long a waiting acquisition waits after a transient error.
	// Default 50ms.
	RetryDelay time.Duration
	// CleanupTimeout bounds each cleanup release: after an uncertain or late acquisition, and the
	// surrender after a late renewal. Default 1s.
	CleanupTimeout time.Duration
	// Logger receives warnings (failed background renewals, failed cleanups). Owner tokens and keys
	// are never logged. Default slog.Default().
	Logger *slog.Logger
	// CheckTTL, when set, validates the TTL given to [Handle.ExtendTTL] before any I/O and returns the
	// TTL to send (whole milliseconds, at least 1ms: a hold without expiry is asked for by
	// [Handle.ExtendNoExpiry], never by a TTL) or an error, returned unchanged, that wraps
	// [luakit.ErrInvalidTTL]. Default: whole milliseconds, at least 1ms.
	CheckTTL func(ttl time.Duration) (time.Duration, error)
	// RetryClose, when set, is called by [Handle.Close] after its release went unanswered (err is its
	// error; a hook's rejection is not such a failure): the primitive may retry release, which is the
	// owed release (no hook admission) and settles the handle once answered, in the background (the
	// semaphore does, within its retry window). Default: none; Close then logs the failure at warning
	// level instead.
	RetryClose func(err error, release func(context.Context) error)
	// Hooks admit and observe the handle's public operations (see [luakit.Hook]): "<NAME> EXTEND"
	// (Extend, ExtendTTL, and each renewal KeepAlive sends), "<NAME> VERIFY", "<NAME> RELEASE" and
	// "<NAME> CLOSE", where <NAME> is Name in upper case. Default: none.
	Hooks luakit.Hooks
	// Instance is the application's name for the primitive (its WithInstance option), passed to Hooks as
	// [luakit.Operation].Instance. Default "".
	Instance string
	// Ack, when enabled, is the acknowledgement every acquisition and renewal waits for (see
	// [luakit.ReplicaAck]), pipelined behind the script on the connection that ran it
	// ([luakit.Script.ExecOrderedAck]). An acquisition sends it through [Config.Send], and
	// [Config.Try] refuses a grant that was not acknowledged (cleanup sent, the [*luakit.AckError]
	// returned, never retried). A renewal sends it through the Backend's [Acknowledger] and counts
	// only once acknowledged: an unacknowledged renewal leaves the local estimate where the last
	// acknowledged write put it and returns the error (KeepAlive retries it). Releases and
	// verifications are never acknowledged. Default: none.
	Ack luakit.ReplicaAck
	// aofProbe caches whether the server has WAITAOF, for an Ack with AOF set through SetReplicaAck
	// (see CheckAck); nil otherwise. A pointer, so that copies of a Config before use share nothing.
	aofProbe *luakit.FeatureCache
}

// Begin admits the operation "<NAME> <verb>" (NAME: Name in upper case) with c.Hooks; with no hooks
// it returns ctx and a zero scope without allocating. Primitives call it for their own public
// operations (acquisitions).
func (c *Config) Begin(ctx context.Context, verb string) (context.Context, luakit.Scope, error) {
	if len(c.Hooks) == 0 {
		return ctx, luakit.Scope{}, nil
	}
	return c.Hooks.Begin(ctx, luakit.Operation{Primitive: c.name(), Name: strings.ToUpper(c.name()) + " " + verb, Instance: c.Instance})
}

func (c *Config) name() string {
	if c.Name == "" {
		return "coordkit"
	}
	return c.Name
}

// checkTTL is CheckTTL, or the default rule: whole milliseconds, at least 1ms. A TTL below 1ms is
// refused whatever CheckTTL says, so 0 never reaches a backend from a caller's TTL.
func (c *Config) checkTTL(ttl time.Duration) (time.Duration, error) {
	if c.CheckTTL != nil && ttl >= time.Millisecond {
		return c.CheckTTL(ttl)
	}
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("%s: extend: %w (got %v)", c.name(), luakit.ErrInvalidTTL, ttl)
	}
	return ttl.Truncate(time.Millisecond), nil
}

func (c *Config) margin(ttl time.Duration) time.Duration {
	if c.Margin == nil || ttl == 0 {
		return 0
	}
	return c.Margin(ttl)
}

// ServerClockStep is how much earlier than send time + TTL a server may end a hold: servers keep
// expiry times in whole milliseconds, taken from a clock read truncated to the millisecond, and Redis
// 8's active expiry removes a key in the very millisecond of its expiry time, so a hold can end up to
// just under 1ms before the command's run time + TTL. Every local estimate is shortened by it (by half
// the TTL at most, for TTLs under 2ms; a primitive's larger margin replaces it), so it never outlives
// the server's hold.
const ServerClockStep = time.Millisecond

// estimate is the local deadline of a hold sent at start with ttl: start + ttl − the larger of the
// primitive's margin (redlock's drift allowance already counts 2ms for clock precision) and the server
// clock's step.
func (c *Config) estimate(start time.Time, ttl time.Duration) time.Time {
	return start.Add(ttl - max(c.margin(ttl), min(ServerClockStep, ttl/2)))
}

func (c *Config) renewFraction() float64 {
	if c.RenewFraction <= 0 {
		return 1.0 / 3
	}
	return c.RenewFraction
}

func (c *Config) retryDelay() time.Duration {
	if c.RetryDelay <= 0 {
		return 50 * time.Millisecond
	}
	return c.RetryDelay
}

func (c *Config) cleanupTimeout() time.Duration {
	if c.CleanupTimeout <= 0 {
		return time.Second
	}
	return c.CleanupTimeout
}

func (c *Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// Handle is a held owner token with a local estimate of the hold's life: the mechanism every
// lease-holding handle of Coordkit holds in an unexported field, writing its own public methods over
// it, so users see only the handle's methods and never Grant. The contract it implements is the
// package documentation's. Its methods are safe for concurrent use. A Handle must not be copied after
// first use. The zero value is not usable: primitives start it with [Handle.Grant].
type Handle struct {
	b   Backend
	cfg *Config

	mu sync.Mutex
	// ctx, cancel and hctx are made on first need (Done, Context, KeepAlive), and the timer that ends
	// the handle at its deadline is armed with them: until something can wait on the handle, the
	// clock checks of every accessor (vouchingLocked) are all there is to end it, so a handle that is
	// taken and released without anyone waiting on it allocates neither a context nor a timer.
	ctx         context.Context
	cancel      context.CancelCauseFunc
	hctx        handleContext // what Context returns: ctx, checking the clock like Err
	cause       error         // why the handle ended (the first cause); nil while it vouches
	opBusy      bool          // Extend or Release runs: they run one at a time
	opWait      chan struct{} // closed when opBusy clears; made only when an operation has to wait
	ttl         time.Duration
	deadline    time.Time // zero: no expiry
	timer       *time.Timer
	settled     bool // a release (or surrender) was answered: the server holds nothing of ours
	releaseSent bool // a release may have reached the server

	// The keep-alive (keepalive.go, scheduler.go): a few fixed fields, no goroutine or channel of its
	// own. Guarded by mu unless said otherwise.
	kaSched    *scheduler         // the scheduler of the last KeepAlive
	kaCtx      context.Context    // the running keep-alive's ctx
	kaStopCtx  func() bool        // unregisters the context.AfterFunc watching kaCtx
	kaCancel   context.CancelFunc // cancels the keep-alive's renewal in flight
	kaIdle     chan struct{}      // made by a Release waiting for a renewal in flight; closed when none is
	kaActive   bool               // a keep-alive runs
	kaGen      atomic.Uint32      // numbers keep-alives: bumped (under mu) by every start and stop
	kaInFlight atomic.Int32       // renewals the scheduler took and that have not finished
	kaPos      int                // place in kaSched's queue + 1, 0 when not queued; guarded by kaSched.mu
	kaDue      time.Time          // when the queued renewal is due; guarded by kaSched.mu
}

// Grant starts h for a hold the server granted to an acquisition sent at start with ttl (0: no
// expiry). h is the caller's zero Handle (a field of the primitive's handle type); b and cfg
// are kept. When the local estimate (start + ttl, shortened as [Handle.Deadline] says) already elapsed,
// the grant is a late reply: h is left unused, an owner-checked release bounded by cfg.CleanupTimeout
// is sent through b (surviving ctx's cancellation), and Grant returns [luakit.ErrLateReply]. Grant
// must be called once per Handle.
func (h *Handle) Grant(ctx context.Context, b Backend, cfg *Config, start time.Time, ttl time.Duration) error {
	if h.b != nil {
		panic("ownership: Grant called twice on one Handle")
	}
	var deadline time.Time
	if ttl > 0 {
		deadline = cfg.estimate(start, ttl)
		if !time.Now().Before(deadline) {
			Cleanup(ctx, cfg, b.Release)
			return luakit.ErrLateReply
		}
	}
	h.b, h.cfg, h.ttl, h.deadline = b, cfg, ttl, deadline
	return nil
}

// GrantRelayed is [Handle.Grant] for a hold that another client's write granted (a fair lock's
// release handing the lease to its next waiter). With cfg.Ack enabled, the grant was not acknowledged
// on this client's connection, so GrantRelayed then renews the hold at ttl and waits for that renewal's
// acknowledgement, which also covers the grant (a replica receives the primary's writes in order); when
// the renewal fails or is not acknowledged, the hold is released (bounded by cfg.CleanupTimeout) and
// the error, a [*luakit.AckError] for a missing acknowledgement, is returned. Without cfg.Ack it is
// Grant. It blocks for Grant, and with cfg.Ack for one more round trip plus the server's wait.
func (h *Handle) GrantRelayed(ctx context.Context, b Backend, cfg *Config, start time.Time, ttl time.Duration) error {
	if err := h.Grant(ctx, b, cfg, start, ttl); err != nil || !cfg.Ack.Enabled() {
		return err
	}
	held, err := h.extendChecked(ctx, ttl, false)
	if err == nil && !held {
		err = luakit.ErrLost
	}
	if err != nil {
		_, _ = h.release(ctx)
		return err
	}
	return nil
}

// contextLocked returns the handle's context, making it (and arming the deadline's timer) on first
// use; a handle that already ended gets a context cancelled with its cause. h.mu must be held.
func (h *Handle) contextLocked() context.Context {
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(context.Background())
		h.hctx = handleContext{Context: h.ctx, h: h}
		switch {
		case h.cause != nil:
			h.cancel(h.cause)
		case !h.deadline.IsZero():
			// expire runs on the timer's goroutine and reads h.timer under h.mu
			h.timer = time.AfterFunc(time.Until(h.deadline), h.expire)
		}
	}
	return h.ctx
}

// Cleanup sends release (a Backend's Release) once, after an acquisition whose outcome was uncertain or
// late, and reports whether the server answered (which settles that this owner holds nothing). It
// survives ctx's cancellation, is bounded by cfg.CleanupTimeout, and carries no deadline so that an
// ordered backend queues it behind the acquisition on the same connection. A failure is logged at
// warning level; the hold, if written, then expires after its TTL.
func Cleanup(ctx context.Context, cfg *Config, release func(context.Context) (bool, error)) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.cleanupTimeout())
	defer cancel()
	ectx, stop := luakit.WithoutDeadline(cctx)
	defer stop()
	if _, err := release(ectx); err != nil {
		cfg.logger().LogAttrs(context.Background(), slog.LevelWarn,
			"coordkit/"+cfg.name()+": owner-checked cleanup not confirmed; the hold, if written, stays until it expires or a later release removes it",
			slog.String("error", err.Error()))
		return false
	}
	return true
}

// expire runs when the local estimate may have elapsed; a renewal can have moved the deadline.
func (h *Handle) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cause != nil || h.deadline.IsZero() {
		return
	}
	if d := time.Until(h.deadline); d > 0 {
		h.timer.Reset(d)
		return
	}
	h.endLocked(luakit.ErrExpired)
}

// vouchingLocked reports whether h still vouches at this instant. The timer that ends h at its
// deadline runs on a goroutine of its own and can fire late; every accessor (Err, Remaining, Done,
// Context, and the Extend, Verify and KeepAlive entry checks) also reads the clock and ends h with
// [luakit.ErrExpired] first when the estimate elapsed, so they agree at every instant. h.mu must be
// held.
func (h *Handle) vouchingLocked() bool {
	if h.cause != nil {
		return false
	}
	if !h.deadline.IsZero() && !time.Now().Before(h.deadline) {
		h.endLocked(luakit.ErrExpired)
		return false
	}
	return true
}

// vouching is vouchingLocked taking h.mu.
func (h *Handle) vouching() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.vouchingLocked()
}

// handleContext is the context [Handle.Context] returns: the handle's own context, whose Done and Err
// first check the clock like [Handle.Err]. Contexts derived from it are cancelled by the handle's
// context directly (context.WithCancel finds it through Value), when the handle ends.
type handleContext struct {
	context.Context
	h *Handle
}

func (c handleContext) Done() <-chan struct{} { return c.h.Done() }

func (c handleContext) Err() error {
	c.h.vouching()
	return c.Context.Err()
}

// endLocked ends the handle with cause (the first cause wins); h.mu must be held. A handle whose
// estimate already elapsed ends with [luakit.ErrExpired] whatever cause is given, as its timer would
// have ended it.
func (h *Handle) endLocked(cause error) {
	h.stopKeepAliveLocked(false) // a renewal in flight finishes (a late reply surrenders the hold)
	if h.cause == nil {
		if !h.deadline.IsZero() && !time.Now().Before(h.deadline) {
			cause = luakit.ErrExpired
		}
		h.cause = cause
		if h.cancel != nil {
			h.cancel(cause)
		}
	}
	if h.timer != nil {
		h.timer.Stop()
	}
}

// lockOp takes the operation slot or returns ctx's error.
func (h *Handle) lockOp(ctx context.Context, op string) error {
	for {
		h.mu.Lock()
		if !h.opBusy {
			h.opBusy = true
			h.mu.Unlock()
			return nil
		}
		if h.opWait == nil {
			h.opWait = make(chan struct{})
		}
		wait := h.opWait
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: waiting for a concurrent operation on the handle: %w", h.cfg.name(), op, ctx.Err())
		}
	}
}

// unlockOp frees the operation slot and wakes the operations waiting for it.
func (h *Handle) unlockOp() {
	h.mu.Lock()
	h.opBusy = false
	if h.opWait != nil {
		close(h.opWait)
		h.opWait = nil
	}
	h.mu.Unlock()
}

// wrap returns err prefixed with the module's name and op, marked uncertain when no reply was read and
// as foreign data for a WRONGTYPE reply.
func (h *Handle) wrap(op string, err error) error {
	err = luakit.MarkForeign(err)
	if errors.Is(err, luakit.ErrUncertain) {
		return fmt.Errorf("%s: %s: %w", h.cfg.name(), op, err)
	}
	if luakit.IsUncertain(err) {
		return fmt.Errorf("%s: %s: %w: %w", h.cfg.name(), op, luakit.ErrUncertain, err)
	}
	return fmt.Errorf("%s: %s: %w", h.cfg.name(), op, err)
}

// TTL returns the hold's current TTL (whole milliseconds; 0 for a hold without expiry). It changes
// only through a confirmed [Handle.ExtendTTL].
func (h *Handle) TTL() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ttl
}

// Deadline returns the local estimate of when the hold ends: the send time of the acquiring or last
// confirmed renewing command plus the TTL, minus the larger of [ServerClockStep] and the primitive's
// margin (such as redlock's drift allowance); the zero time for a hold without expiry. It does not
// change when the handle ends.
func (h *Handle) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Remaining returns the local estimate of the hold's remaining life: zero once the handle ended
// (expired, lost or released), [Forever] for a held handle without expiry.
func (h *Handle) Remaining() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.vouchingLocked() {
		return 0
	}
	if h.deadline.IsZero() {
		return Forever
	}
	return time.Until(h.deadline)
}

// Done returns a channel closed when the handle stops vouching for ownership: the local estimate
// elapsed, the server said the hold is gone, or a release was sent. The channel is the same for the
// handle's whole life, and once closed the handle never vouches again. [Handle.Err] says why.
//
// A timer closes it when the estimate elapses, which the scheduler can run a little late; Done, Err,
// Remaining and Context also read the clock and close it first when the estimate elapsed, so once
// Remaining is 0 or Err is not nil the channel is closed, and while it is open Err is nil.
func (h *Handle) Done() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.vouchingLocked()
	return h.contextLocked().Done()
}

// Context returns a context cancelled when [Handle.Done] closes, with [Handle.Err] as its cause
// (context.Cause). It is the same context for the handle's whole life; its Done and Err check the
// clock as [Handle.Done] does, and read context.Cause after one of them. Derive the protected work's context from it: a derived context ends
// when the handle's timer (or any accessor) ends the handle.
func (h *Handle) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.contextLocked()
	return h.hctx
}

// Err returns nil while the handle vouches for ownership, then its cause (the first one is kept):
// [luakit.ErrExpired], [luakit.ErrLost], [luakit.ErrReleased], or, after a [Handle.KeepAlive]
// renewal the server refused with a terminal error (luakit.IsTerminal: an ACL refusal matches
// [luakit.ErrNoPermission], a foreign value [luakit.ErrForeignData]), that error. It reads the clock:
// once the local estimate elapsed it returns [luakit.ErrExpired] (and closes [Handle.Done]) even if
// the handle's timer has not fired yet.
func (h *Handle) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.vouchingLocked() {
		return nil
	}
	return h.cause
}

// Extend renews the hold at its current TTL (a hold without expiry stays so); see [Handle.ExtendTTL].
func (h *Handle) Extend(ctx context.Context) (bool, error) {
	if len(h.cfg.Hooks) == 0 {
		return h.extendChecked(ctx, 0, true)
	}
	return admitted(h, ctx, "EXTEND", func(ctx context.Context) (bool, error) { return h.extendChecked(ctx, 0, true) })
}

// ExtendNoExpiry removes the hold's expiry, only if this owner still holds it: [Handle.ExtendTTL]'s
// rows with no expiry instead of a TTL (Remaining becomes [Forever], Deadline the zero time, TTL 0, a
// running KeepAlive stops renewing). Only a primitive whose backend's Extend takes 0 as "no expiry"
// offers it (the semaphore's permits); with Config.Hooks it is the operation "<NAME> EXTEND".
func (h *Handle) ExtendNoExpiry(ctx context.Context) (bool, error) {
	if len(h.cfg.Hooks) == 0 {
		return h.extendChecked(ctx, 0, false)
	}
	return admitted(h, ctx, "EXTEND", func(ctx context.Context) (bool, error) { return h.extendChecked(ctx, 0, false) })
}

// admitted runs op as the public operation verb under cfg.Hooks.
func admitted[T any](h *Handle, ctx context.Context, verb string, op func(context.Context) (T, error)) (T, error) {
	return Do(ctx, h.cfg, verb, op)
}

// Do runs op as the public operation "<NAME> verb" admitted by cfg.Hooks (see [Config.Begin]): a
// rejection is returned unchanged without running op; otherwise op runs with the hooks' context and
// its error completes the scope. With no hooks it just calls op.
func Do[T any](ctx context.Context, cfg *Config, verb string, op func(context.Context) (T, error)) (T, error) {
	ctx, sc, err := cfg.Begin(ctx, verb)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := op(ctx)
	sc.End(err)
	return v, err
}

// ExtendTTL restarts the hold's expiry at ttl, counted on the server, only if this owner still holds
// it; its results are the package documentation's rows "Extend ...". ttl is truncated to whole
// milliseconds; below 1ms (0 included) it fails with an error wrapping [luakit.ErrInvalidTTL] before
// any I/O (Config.CheckTTL adds a primitive's own rule: redlock needs more than its drift allowance).
// Fencing tokens never change. On an uncertain outcome the handle keeps its previous estimate,
// lowered to send time + ttl when ttl is shorter. Extend and Release on one handle run one at a time;
// ctx bounds the wait for the other one and the round trip (no socket deadline is set). With
// Config.Hooks it is the operation "<NAME> EXTEND"; a rejection returns the hook's error and leaves the
// handle unchanged.
func (h *Handle) ExtendTTL(ctx context.Context, ttl time.Duration) (bool, error) {
	if len(h.cfg.Hooks) == 0 {
		return h.extendTTL(ctx, ttl)
	}
	return admitted(h, ctx, "EXTEND", func(ctx context.Context) (bool, error) { return h.extendTTL(ctx, ttl) })
}

// extendTTL checks ttl and renews at it.
func (h *Handle) extendTTL(ctx context.Context, ttl time.Duration) (bool, error) {
	ttl, err := h.cfg.checkTTL(ttl)
	if err != nil {
		return false, err
	}
	return h.extendChecked(ctx, ttl, false)
}

// extendChecked renews at ttl, already validated (0: no expiry), or with current at the handle's TTL
// read once the operation slot is taken: a renewal at the current TTL (Extend, a keep-alive round)
// that waited for a concurrent ExtendTTL then renews at the TTL that ExtendTTL set, never at the one
// it replaced.
func (h *Handle) extendChecked(ctx context.Context, ttl time.Duration, current bool) (bool, error) {
	if err := h.lockOp(ctx, "extend"); err != nil {
		return false, err
	}
	defer h.unlockOp()
	if current {
		ttl = h.TTL()
	}
	if !h.vouching() {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s: extend: %w", h.cfg.name(), err)
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	start := time.Now()
	held, err := h.extend(ectx, ttl)
	stop()
	h.mu.Lock()
	if err != nil {
		if errors.Is(err, luakit.ErrUncertain) || luakit.IsUncertain(err) {
			// The renewal may run later: keep the estimate, lowered if the new TTL is shorter.
			if ttl > 0 && h.cause == nil {
				if d := h.cfg.estimate(start, ttl); h.deadline.IsZero() || d.Before(h.deadline) {
					h.setDeadlineLocked(d)
				}
			}
		}
		h.mu.Unlock()
		return false, h.wrap("extend", err)
	}
	if !held {
		h.endLocked(luakit.ErrLost)
		h.mu.Unlock()
		return false, nil
	}
	if h.cause != nil || (!h.deadline.IsZero() && !time.Now().Before(h.deadline)) {
		// The reply came after the estimate elapsed: not a success. The server renewed, so give the
		// hold back instead of leaving it for its whole TTL (for ever with no expiry).
		h.endLocked(luakit.ErrExpired)
		h.releaseSent = true
		h.mu.Unlock()
		if Cleanup(ctx, h.cfg, h.b.Release) {
			h.mu.Lock()
			h.settled = true
			h.mu.Unlock()
		}
		return false, nil
	}
	h.ttl = ttl
	if ttl == 0 {
		h.deadline = time.Time{}
		if h.timer != nil {
			h.timer.Stop()
		}
	} else {
		h.setDeadlineLocked(h.cfg.estimate(start, ttl))
	}
	if h.kaActive {
		// Re-arm the keep-alive from the new deadline (a hold without expiry needs none).
		if ttl == 0 {
			h.stopKeepAliveLocked(true)
		} else {
			h.kaSched.reschedule(h, time.Now().Add(h.nextRenewalLocked()))
		}
	}
	h.mu.Unlock()
	return true, nil
}

// extend sends the renewal through the Backend: with Config.Ack, acknowledged ([Acknowledger]); an
// unacknowledged renewal comes back as its error (the caller keeps the estimate).
func (h *Handle) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if !h.cfg.Ack.Enabled() {
		return h.b.Extend(ctx, ttl)
	}
	a, ok := h.b.(Acknowledger)
	if !ok {
		return false, &luakit.AckError{Ack: h.cfg.Ack, Err: errors.New("the primitive cannot acknowledge renewals")}
	}
	return a.ExtendAcknowledged(ctx, ttl, h.cfg.Ack)
}

// setDeadlineLocked moves the local estimate to d and rearms the timer; h.mu must be held.
func (h *Handle) setDeadlineLocked(d time.Time) {
	h.deadline = d
	switch {
	case h.timer != nil:
		h.timer.Reset(time.Until(d))
	case h.ctx != nil:
		// The context exists, so something may wait on Done: arm the timer (a hold that had no expiry).
		h.timer = time.AfterFunc(time.Until(d), h.expire)
	}
}

// Verify asks the server whether this owner holds at this instant; it cannot vouch for any later
// moment and does not renew.
//
//   - (true, nil): held when the server ran the check, and the handle still vouches.
//   - (false, nil) with no I/O: the handle had already ended.
//   - (false, nil) and the handle ends with [luakit.ErrLost]: the server holds nothing of this owner.
//   - (false, nil): held, but the handle's estimate elapsed while the check was in flight.
//   - (false, err): the check failed or was uncertain (wrapping [luakit.ErrUncertain]), or ctx had
//     already ended (nothing sent); the handle is unchanged.
//
// It blocks for one round trip, bounded by ctx, and does not wait for a concurrent Extend or Release.
// With Config.Hooks it is the operation "<NAME> VERIFY"; a rejection returns the hook's error and
// sends nothing.
func (h *Handle) Verify(ctx context.Context) (bool, error) {
	if len(h.cfg.Hooks) == 0 {
		return h.verify(ctx)
	}
	return admitted(h, ctx, "VERIFY", h.verify)
}

func (h *Handle) verify(ctx context.Context) (bool, error) {
	if !h.vouching() {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("%s: verify: %w", h.cfg.name(), err)
	}
	ectx, stop := luakit.WithoutDeadline(ctx)
	held, err := h.b.Verify(ectx)
	stop()
	if err != nil {
		return false, h.wrap("verify", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !held {
		h.endLocked(luakit.ErrLost)
		return false, nil
	}
	return h.vouchingLocked(), nil
}

// Release removes the hold if this owner still has it (another owner's hold is never touched), after
// stopping a running keep-alive and waiting until no renewal of it is in flight (one is cancelled).
// Its results are the package documentation's rows "Release ...": a ctx that already ended sends nothing and leaves the handle
// vouching; otherwise the handle ends with [luakit.ErrReleased] and Release reports [Released],
// [NotOwned], [AlreadyReleased], or an error wrapping [luakit.ErrUncertain] (call it again to settle).
// Any other error means the script did not run. Concurrent calls run one at a time (after an
// in-flight Extend): exactly one reports the removal. ctx bounds the wait and the round trip. With
// Config.Hooks it is the operation "<NAME> RELEASE"; a rejection changes nothing and sends nothing.
func (h *Handle) Release(ctx context.Context) (Outcome, error) {
	if len(h.cfg.Hooks) == 0 {
		return h.release(ctx)
	}
	return admitted(h, ctx, "RELEASE", h.release)
}

func (h *Handle) release(ctx context.Context) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: release: nothing sent, the handle is unchanged: %w", h.cfg.name(), err)
	}
	h.stopKeepAlive()
	if err := h.lockOp(ctx, "release"); err != nil {
		return 0, err
	}
	defer h.unlockOp()
	h.mu.Lock()
	if h.settled {
		h.endLocked(luakit.ErrReleased)
		h.mu.Unlock()
		return AlreadyReleased, nil
	}
	if err := ctx.Err(); err != nil {
		h.mu.Unlock()
		return 0, fmt.Errorf("%s: release: nothing sent, the handle is unchanged: %w", h.cfg.name(), err)
	}
	retry := h.releaseSent
	h.releaseSent = true
	h.endLocked(luakit.ErrReleased)
	h.mu.Unlock()

	ectx, stop := luakit.WithoutDeadline(ctx)
	removed, err := h.b.Release(ectx)
	stop()
	if err != nil {
		return 0, h.wrap("release", err)
	}
	h.mu.Lock()
	h.settled = true
	h.mu.Unlock()
	switch {
	case removed:
		return Released, nil
	case retry:
		return AlreadyReleased, nil
	default:
		return NotOwned, nil
	}
}

// Close releases the hold best-effort, for use as an io.Closer: one [Handle.Release] bounded by the
// cleanup timeout (Config.CleanupTimeout, default 1s) whatever the caller's context, returning its error:
// nil when the server answered (whatever the outcome) or an earlier answered release settled the handle
// (no I/O then), else the release's error (wrapping [luakit.ErrUncertain] when no reply was read). The
// handle ends with [luakit.ErrReleased] once the release is sent, and a running keep-alive is stopped.
// A failed release is logged at warning level, or handed to Config.RetryClose for background retries
// where the primitive sets it; the hold otherwise expires after its TTL. Call Release when the outcome
// matters.
//
// With Config.Hooks it is the operation "<NAME> CLOSE" (not a RELEASE as well); a rejection is
// returned unchanged with nothing sent, nothing logged and the handle unchanged, so Close can be
// retried.
func (h *Handle) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.cleanupTimeout())
	defer cancel()
	_, err := Do(ctx, h.cfg, "CLOSE", h.close)
	return err
}

// close is Close's admitted operation: the release, then the failure's report or retry.
func (h *Handle) close(ctx context.Context) (Outcome, error) {
	out, err := h.release(ctx)
	if err == nil {
		return out, nil
	}
	if h.cfg.RetryClose != nil {
		// The retries are owed by the admitted Close: they open no hook scope of their own.
		h.cfg.RetryClose(err, func(ctx context.Context) error {
			_, err := h.release(ctx)
			return err
		})
		return out, err
	}
	h.cfg.logger().LogAttrs(context.Background(), slog.LevelWarn,
		"coordkit/"+h.cfg.name()+": best-effort release in Close failed; the hold expires after its TTL unless a later Release removes it",
		slog.String("error", err.Error()))
	return out, err
}
