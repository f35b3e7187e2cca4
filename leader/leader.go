package leader

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/luakit"
)

// Metric instrument names (Int64Counters on the meter named by the module path). Neither carries keys,
// owner tokens or fencing tokens as attributes.
const (
	// MetricChanges counts leadership changes of this process, with attribute state=elected|revoked.
	MetricChanges = "coordkit.leader_election.changes"
	// MetricAcquireFailures counts transient campaign failures (server replies LOADING, BUSY,
	// CLUSTERDOWN, TRYAGAIN, MASTERDOWN, READONLY and attempts with an uncertain outcome), each retried
	// after the retry delay. Contention (another leader holds the lease) is not a failure.
	MetricAcquireFailures = "coordkit.leader_election.acquire_failures"
	// MetricIsLeader is an observable Int64Gauge: 1 while this Election holds a current term
	// ([Election.Current]), else 0, so running followers export the series too. Only a running
	// Election reports it: its callback is registered when [Election.Run] begins and unregistered
	// when Run returns, so a stopped (or never run) Election exports no is-leader point.
	MetricIsLeader = "coordkit.leader_election.is_leader"
)

// AttrInstance is the attribute every instrument carries when [WithInstance] named the Election.
const AttrInstance = attribute.Key("coordkit.instance")

const meterName = "github.com/coordkit/coordkit/leader"

// Election campaigns for leadership of one fenced lease (the [lock] module's lease key and fence
// counter) on behalf of this process. Create it with [New]; run it with [Election.Run] (or
// [Election.Start] / [Election.Stop]). It exports the [MetricIsLeader] gauge only while it runs.
// Its methods are safe for concurrent use; one Run at a time.
//
// An Election never closes or reconfigures the caller's client.
type Election struct {
	locker             *lock.Locker
	name               string
	named              bool   // the keys are derived from name (no WithKeys)
	leaseKey, fenceKey string // without the prefix
	cfg                config
	changes            metric.Int64Counter
	failures           metric.Int64Counter
	attrElected        metric.MeasurementOption // state=elected (and the instance, when named)
	attrRevoked        metric.MeasurementOption
	attrInstance       metric.MeasurementOption // the instance alone; no attributes when unnamed
	meter              metric.Meter
	isLeader           metric.Int64ObservableGauge

	// unreachableSince is the UnixNano of the first of the current run of campaign attempts that did
	// not reach the server (0: the last one did); stopCampaign ends the campaign in flight with a cause.
	unreachableSince atomic.Int64
	stopCampaign     atomic.Pointer[context.CancelCauseFunc]
	running          atomic.Bool
	renewals         sync.WaitGroup // renewals still in flight after hold gave up on them; Run waits for them
	current          atomic.Pointer[Term]

	mu     sync.Mutex // guards the Start/Stop fields
	stop   context.CancelFunc
	done   chan struct{}
	runErr error
}

// New returns an Election named name. Every candidate of one election uses the same name (and key
// prefix). The election's two keys are derived from name as the lock module derives a named lock's
// ([github.com/coordkit/coordkit/lock.Keys]): the lease key "{name}:lease" and the fence key
// "{name}:fence", each after the [WithKeyPrefix] prefix, in one Cluster slot on every deployment.
// [WithKeys] sets other keys for an existing layout (name then only names the election). name is
// binary-safe and must not be empty. Reserve both keys for this election: never delete or expire the
// counter.
//
// New does no I/O and registers no metric callback ([Election.Run] does, for its length). It fails
// with an error wrapping [ErrNilClient] for a nil client and with an error matching [ErrInvalidConfig] for an empty name, an invalid key pair (empty or equal keys, keys in
// different Cluster slots: see [WithKeys] and [WithStrictSlots]; a derived pair in two slots, which
// only a name starting with '}' or a prefix whose first braces are empty can give) or an invalid
// option (including a safety margin not under half the lease duration).
func New(client rueidis.Client, name string, opts ...Option) (*Election, error) {
	if client == nil {
		return nil, fmt.Errorf("leader: %w", ErrNilClient)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if m := cfg.safetyMargin(); m >= cfg.lease/2 {
		return nil, luakit.InvalidConfig("leader", "safety margin %v must be under half the lease duration %v", m, cfg.lease)
	}
	if err := luakit.ValidateKey("name", name); err != nil {
		return nil, luakit.InvalidConfigOf("leader", err, "")
	}
	named := cfg.leaseKey == ""
	leaseKey, fenceKey := cfg.leaseKey, cfg.fenceKey
	if named {
		leaseKey, fenceKey = lock.Keys(name)
	}
	ks := luakit.NewKeyspace(cfg.prefix)
	pl, pf := ks.Key(leaseKey), ks.Key(fenceKey)
	if pl == pf {
		return nil, fmt.Errorf("leader: %w", lock.ErrSameKey)
	}
	if named || cfg.strictSlots || client.Mode() == rueidis.ClientModeCluster {
		if err := luakit.CheckSameSlot(
			luakit.NamedKey{Role: "lease key", Key: pl},
			luakit.NamedKey{Role: "fence key", Key: pf},
		); err != nil {
			return nil, luakit.InvalidConfigOf("leader", err, "")
		}
	}
	e := &Election{name: name, named: named, leaseKey: leaseKey, fenceKey: fenceKey, cfg: cfg}
	lopts := []lock.Option{
		lock.WithKeyPrefix(cfg.prefix),
		lock.WithRetryDelay(cfg.retryDelay),
		lock.WithCleanupTimeout(cfg.cleanupTimeout),
		lock.WithLogger(cfg.logger),
	}
	lopts = append(lopts, lock.WithStrictSlots(cfg.strictSlots))
	if cfg.ack.Enabled() {
		lopts = append(lopts, lock.WithReplicaAck(cfg.ack))
	}
	if cfg.tracker != nil {
		lopts = append(lopts, lock.WithTracker(cfg.tracker))
	}
	// Acquire retries transient failures itself; the election's own hook on its Locker (not the
	// application's hooks) sees each attempt, counts the failures and keeps the connection-recovery
	// budget's account, attempt by attempt.
	lopts = append(lopts, lock.WithHooks(attempts{e}))
	lk, err := lock.New(client, lopts...)
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err) // lock's option errors match ErrInvalidConfig
	}
	e.locker = lk
	var inst []attribute.KeyValue
	if cfg.instance != "" {
		inst = []attribute.KeyValue{AttrInstance.String(cfg.instance)}
	}
	e.attrInstance = metric.WithAttributes(inst...)
	e.attrElected = metric.WithAttributes(append([]attribute.KeyValue{attribute.String("state", "elected")}, inst...)...)
	e.attrRevoked = metric.WithAttributes(append([]attribute.KeyValue{attribute.String("state", "revoked")}, inst...)...)
	meter := cfg.provider().Meter(meterName)
	gauge, err := meter.Int64ObservableGauge(MetricIsLeader, metric.WithUnit("1"),
		metric.WithDescription("1 while this process leads the election, else 0."))
	if err != nil {
		return nil, fmt.Errorf("leader: metric %s: %w", MetricIsLeader, err)
	}
	e.meter, e.isLeader = meter, gauge
	if e.changes, err = meter.Int64Counter(MetricChanges, metric.WithUnit("{change}"),
		metric.WithDescription("Leadership changes of this process (state=elected|revoked).")); err != nil {
		return nil, fmt.Errorf("leader: metric %s: %w", MetricChanges, err)
	}
	if e.failures, err = meter.Int64Counter(MetricAcquireFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("Transient leadership acquisition failures, retried after the retry delay.")); err != nil {
		return nil, fmt.Errorf("leader: metric %s: %w", MetricAcquireFailures, err)
	}
	return e, nil
}

// observeIsLeader is the is-leader gauge's callback, registered for the length of one Run.
func (e *Election) observeIsLeader(_ context.Context, o metric.Observer) error {
	v := int64(0)
	if _, ok := e.Current(); ok {
		v = 1
	}
	o.ObserveInt64(e.isLeader, v, e.attrInstance)
	return nil
}

// attempts is the hook the Election installs on its Locker: it admits every operation and, as a
// [luakit.AttemptObserver], sees each attempt of a campaign's lock.Locker.Acquire.
type attempts struct{ e *Election }

// Admit admits op without a completion.
func (attempts) Admit(context.Context, luakit.Operation) (context.Context, luakit.Completion, error) {
	return nil, nil, nil
}

// ObserveAttempt counts a transient failure, which Acquire retries after the retry delay, and keeps
// the connection-recovery budget's account.
func (a attempts) ObserveAttempt(ctx context.Context, err error) { a.e.observeAttempt(ctx, err) }

// observeAttempt is [attempts.ObserveAttempt].
func (e *Election) observeAttempt(ctx context.Context, err error) {
	if luakit.IsTransient(err) {
		e.failures.Add(context.Background(), 1, e.attrInstance)
	}
	e.recovery(ctx, err)
}

// recovery keeps the connection-recovery budget's account for one campaign attempt's result: a reply
// (any, error replies included) resets it; a failure that reached no server starts or extends the
// current run of failures, and one past the budget ends the campaign with [ErrRecoveryExhausted]. A
// failure caused by the campaign's own context ending is not counted.
func (e *Election) recovery(ctx context.Context, err error) {
	var re *rueidis.RedisError
	if err == nil || errors.As(err, &re) {
		e.unreachableSince.Store(0)
		return
	}
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	if e.unreachableSince.CompareAndSwap(0, now.UnixNano()) {
		return
	}
	if d := now.Sub(time.Unix(0, e.unreachableSince.Load())); d >= e.cfg.recovery {
		if stop := e.stopCampaign.Load(); stop != nil {
			(*stop)(fmt.Errorf("%w: no server reached for %v: %w", ErrRecoveryExhausted, d.Round(time.Millisecond), err))
		}
	}
}

// Name returns the election's name as given to [New].
func (e *Election) Name() string { return e.name }

// LeaseKey returns the lease key without the key prefix: derived from the name ("{name}:lease") or
// given with [WithKeys].
func (e *Election) LeaseKey() string { return e.leaseKey }

// FenceKey returns the fence (counter) key without the key prefix: derived from the name
// ("{name}:fence") or given with [WithKeys].
func (e *Election) FenceKey() string { return e.fenceKey }

// Current returns the current term and true while this process leads, else the zero Term and false.
// It is a local observation (the term's context is not yet cancelled), not a check with the server.
func (e *Election) Current() (Term, bool) {
	t := e.current.Load()
	if t == nil || t.ctx.Err() != nil {
		return Term{}, false
	}
	return *t, true
}

// Run campaigns and leads until ctx ends or a terminal error occurs; it blocks. It campaigns, leads
// each term and campaigns again as the package documentation's Model section says, retries failures
// as its Errors section says, and reports this Election in [MetricIsLeader] while it runs (it fails at
// once if the gauge's callback cannot be registered).
//
// Run returns nil when ctx ends (after revoking and releasing a held term); [ErrRunning] at once when
// the Election already runs; the elected callback's error, or one wrapping [ErrCallbackPanic], after
// the lease release; or a terminal error: a terminal reply (an [ErrNoPermission] also from the release
// at a term's end, the lease then expiring), a [*lock.CounterError], rueidis.ErrClosing, or one
// wrapping [ErrRecoveryExhausted]. No goroutine started by Run outlives it: it waits for the callbacks
// and observers, so a callback that ignores its context delays Run's return (never the renewals' end).
// To stop, end ctx (or call [Election.Stop]), then close the client (see Lifecycle).
func (e *Election) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer e.running.Store(false)
	// The is-leader gauge's callback lives as long as this Run: a stopped Election exports nothing,
	// and Elections made over time leave no callbacks behind on a shared meter provider.
	reg, err := e.meter.RegisterCallback(e.observeIsLeader, e.isLeader)
	if err != nil {
		return fmt.Errorf("leader: metric %s: %w", MetricIsLeader, err)
	}
	defer func() {
		if uerr := reg.Unregister(); uerr != nil {
			e.cfg.logger.Warn("coordkit/leader: unregistering the is-leader gauge callback failed", "error", uerr)
		}
	}()
	defer e.renewals.Wait() // no renewal goroutine outlives Run
	n := newNotifier(e.cfg.observers, e.cfg)
	defer n.close()

	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	pause := func(d time.Duration) bool {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
			return true
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
	e.unreachableSince.Store(0)
	for {
		if ctx.Err() != nil {
			return nil
		}
		actx, stop := context.WithCancelCause(ctx)
		e.stopCampaign.Store(&stop)
		lease, rejected, err := e.campaign(actx)
		e.stopCampaign.Store(nil)
		cause := context.Cause(actx)
		stop(nil)
		if rejected {
			return err // a hook refused the campaign: its error, unchanged
		}
		if err != nil {
			if errors.Is(cause, ErrRecoveryExhausted) && ctx.Err() == nil {
				return cause
			}
			if ctx.Err() != nil {
				return nil
			}
			if !retryable(err) {
				return fmt.Errorf("leader: campaign: %w", err)
			}
			if !luakit.IsTransient(err) { // transient replies were counted as they arrived
				e.failures.Add(context.Background(), 1, e.attrInstance)
			}
			e.cfg.logger.Debug("coordkit/leader: campaign failed, retrying", "error", err, "retry_delay", e.cfg.retryDelay)
			if !pause(e.cfg.retryDelay) {
				return nil
			}
			continue
		}
		relinquished, err := e.lead(ctx, lease, n)
		if err != nil {
			return err
		}
		if relinquished && !pause(e.cfg.retryDelay) {
			return nil
		}
	}
}

// campaign is one LEADER CAMPAIGN operation: admitted by the hooks, then one campaign wait
// (acquire). rejected reports a hook's refusal (err is then the hook's error).
func (e *Election) campaign(ctx context.Context) (lease *lock.Lease, rejected bool, err error) {
	ctx, sc, err := e.cfg.hooks.Begin(ctx, e.op(opCampaign))
	if err != nil {
		return nil, true, err
	}
	lease, err = e.acquire(ctx)
	sc.End(err)
	return lease, false, err
}

// op is the hook operation name for this Election.
func (e *Election) op(name string) luakit.Operation {
	return luakit.Operation{Primitive: "leader", Name: name, Instance: e.cfg.instance}
}

// The operation names of the Election's hooks ([WithHooks]).
const (
	opCampaign = "LEADER CAMPAIGN"
	opRenew    = "LEADER RENEW"
	opResign   = "LEADER RESIGN"
	opInspect  = "LEADER INSPECT"
)

// acquire campaigns once through the lock: by name, so the lock derives the keys, or with the keys
// given with WithKeys.
func (e *Election) acquire(ctx context.Context) (*lock.Lease, error) {
	if e.named {
		return e.locker.Acquire(ctx, e.name, e.cfg.lease)
	}
	return e.locker.AcquireKeys(ctx, e.leaseKey, e.fenceKey, e.cfg.lease)
}

// retryable reports whether a campaign error is worth another attempt.
func retryable(err error) bool {
	if errors.Is(err, rueidis.ErrClosing) {
		return false
	}
	var ce *lock.CounterError
	if errors.As(err, &ce) {
		return false
	}
	return luakit.IsTransient(err) || luakit.IsUncertain(err) || errors.Is(err, lock.ErrUncertain) ||
		errors.Is(err, lock.ErrLateReply) || errors.Is(err, lock.ErrNotAcquired)
}

// lead runs one term on a freshly acquired lease. It reports whether the elected callback relinquished
// leadership, and returns a callback failure.
func (e *Election) lead(ctx context.Context, lease *lock.Lease, n *notifier) (bool, error) {
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	term := Term{FencingToken: lease.FencingToken(), Elected: time.Now(), owner: lease.OwnerToken(), ctx: termCtx}
	tp := &term
	e.current.Store(tp)
	e.changes.Add(context.Background(), 1, e.attrElected)
	n.notify(Change{State: Elected, Term: term})

	cbDone := make(chan error, 1)
	cbStarted := make(chan struct{})
	go func() {
		close(cbStarted)
		cbDone <- e.callElected(termCtx, term)
	}()

	cause, cbErr, cbReturned := e.hold(ctx, lease, cbDone)
	cancel(cause)
	cause = context.Cause(termCtx) // the parent's cause when ctx ended first
	e.current.CompareAndSwap(tp, nil)
	e.changes.Add(context.Background(), 1, e.attrRevoked)
	n.notify(Change{State: Revoked, Term: term, Cause: cause})

	revDone := make(chan error, 1)
	<-cbStarted // OnRevoked never starts before the term's OnElected has started
	go func() { revDone <- e.callRevoked(term) }()
	if !cbReturned {
		cbErr = <-cbDone
	}
	revErr := <-revDone
	if cbErr != nil && (!cbReturned || ctx.Err() != nil) && (errors.Is(cbErr, context.Canceled) || errors.Is(cbErr, cause)) {
		// The callback reacted to the revocation or shutdown (for example returned ctx.Err()): a normal
		// return. (On shutdown the term's context ends with Run's, so the callback may return first.)
		cbErr = nil
	}

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.cleanupTimeout)
	relErr := e.resign(rctx, lease)
	rcancel()
	if relErr != nil {
		e.cfg.logger.Warn("coordkit/leader: releasing the lease failed; it expires after the lease duration", "error", relErr)
	}
	if err := errors.Join(cbErr, revErr); err != nil {
		return false, fmt.Errorf("leader: callback: %w", err)
	}
	if luakit.IsTerminal(cause) {
		return false, cause // a renewal the server refused for good (such as NOPERM): Run returns it
	}
	if errors.Is(relErr, ErrNoPermission) {
		// The ACL refuses the release: every later term would leave its lease held too.
		return false, fmt.Errorf("leader: release: %w", relErr)
	}
	return cbReturned, nil
}

// hold renews the lease until the term must end, and returns the revocation cause; when the elected
// callback returned first it also returns the callback's result and true.
func (e *Election) hold(ctx context.Context, lease *lock.Lease, cbDone <-chan error) (cause, cbErr error, cbReturned bool) {
	ttl := e.cfg.lease
	margin := e.cfg.safetyMargin()
	next := lease.Deadline().Add(-ttl / 2)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		fenceAt := lease.Deadline().Add(-margin)
		wake := next
		if fenceAt.Before(wake) {
			wake = fenceAt
		}
		timer.Reset(time.Until(wake))
		select {
		case <-ctx.Done():
			return context.Cause(ctx), nil, false
		case err := <-cbDone:
			return ErrReleased, err, true
		case <-lease.Done():
			if errors.Is(lease.Err(), lock.ErrLost) {
				return ErrLost, nil, false
			}
			return ErrExpired, nil, false
		case <-timer.C:
		}
		now := time.Now()
		if !now.Before(fenceAt) {
			return ErrExpired, nil, false
		}
		if now.Before(next) {
			continue
		}
		fenced, ok, err := e.renew(ctx, lease, fenceAt)
		if fenced {
			return ErrExpired, nil, false
		}
		switch {
		case ok:
			next = lease.Deadline().Add(-ttl / 2)
		case err == nil && errors.Is(lease.Err(), lock.ErrLost):
			return ErrLost, nil, false
		case err == nil:
			// The renewal's reply came after the local estimate elapsed (the lease surrendered it), or
			// the estimate elapsed before it was sent.
			return ErrExpired, nil, false
		case ctx.Err() != nil:
			return context.Cause(ctx), nil, false
		case errors.Is(err, rueidis.ErrClosing):
			return fmt.Errorf("leader: %w: %w", ErrLost, err), nil, false
		case luakit.IsTerminal(err) && !errors.Is(err, lock.ErrUncertain):
			// Refused by the server (NOPERM, WRONGTYPE...): a retry cannot succeed; Run returns it.
			return fmt.Errorf("leader: renew: %w", err), nil, false
		default:
			e.cfg.logger.Warn("coordkit/leader: renewal failed, retrying", "error", err, "retry_delay", e.cfg.retryDelay)
			next = time.Now().Add(e.cfg.retryDelay)
		}
	}
}

// renew extends the lease with a context that ends at fenceAt, and waits for the result or fenceAt,
// whichever comes first: self-fencing must not depend on the client honouring the context promptly
// (a connection being re-established to a stalled server can hold a call past it). When fenceAt
// passes first it returns fenced=true at once; the abandoned renewal finishes in the background and
// Run waits for it before returning.
func (e *Election) renew(ctx context.Context, lease *lock.Lease, fenceAt time.Time) (fenced, ok bool, err error) {
	rctx, rcancel := context.WithDeadline(ctx, fenceAt)
	type result struct {
		ok  bool
		err error
	}
	hctx, sc, err := e.cfg.hooks.Begin(rctx, e.op(opRenew))
	if err != nil {
		rcancel()
		return false, false, err // handled like a failed renewal: retried until the fence
	}
	done := make(chan result, 1)
	e.renewals.Add(1)
	go func() {
		defer e.renewals.Done()
		ok, err := lease.Extend(hctx)
		sc.End(err) // also for a renewal abandoned at the fence, once it returns
		done <- result{ok, err}
	}()
	fence := time.NewTimer(time.Until(fenceAt))
	defer fence.Stop()
	select {
	case r := <-done:
		rcancel()
		return false, r.ok, r.err
	case <-fence.C:
		rcancel()
		select {
		case r := <-done: // finished at the same instant: use it
			if r.ok && time.Now().Before(lease.Deadline().Add(-e.cfg.safetyMargin())) {
				return false, r.ok, r.err
			}
		default:
		}
		return true, false, nil
	}
}

func (e *Election) callElected(ctx context.Context, term Term) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: OnElected: %v\n%s", ErrCallbackPanic, r, debug.Stack())
		}
	}()
	if e.cfg.onElected == nil {
		<-ctx.Done()
		return nil
	}
	return e.cfg.onElected(ctx, term)
}

func (e *Election) callRevoked(term Term) (err error) {
	if e.cfg.onRevoked == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: OnRevoked: %v\n%s", ErrCallbackPanic, r, debug.Stack())
		}
	}()
	e.cfg.onRevoked(term)
	return nil
}

// Start runs [Election.Run] in a new goroutine with a context derived from ctx (its values and
// cancellation), and returns at once: [ErrRunning] if the election already runs, else nil. Stop it with
// [Election.Stop]; [Election.Stopped] is closed when that run returns.
func (e *Election) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done != nil || e.running.Load() {
		return ErrRunning
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	e.stop, e.done = cancel, done
	go func() {
		err := e.Run(rctx)
		e.mu.Lock()
		e.runErr = err
		e.mu.Unlock()
		close(done)
	}()
	return nil
}

// Stopped returns a channel closed when the run started by [Election.Start] has returned (ctx ended,
// Stop, or a terminal error that Stop then reports), or nil when none was started or Stop already
// returned its result. It says nothing about a term: a term's end is its [Term.Context].
func (e *Election) Stopped() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done
}

// Stop ends the run started by [Election.Start]: it cancels it (revoking a held term) and waits for it to
// return, or for ctx to end. It returns Run's result (nil after a clean shutdown, or the terminal error
// that ended it earlier), ctx.Err() if waiting stopped first (the run still ends on its own; call Stop
// again to wait), or [ErrNotRunning] when nothing was started. After Stop returned Run's result the
// Election can be started again.
func (e *Election) Stop(ctx context.Context) error {
	e.mu.Lock()
	stop, done := e.stop, e.done
	e.mu.Unlock()
	if done == nil {
		return ErrNotRunning
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.runErr
	if e.done == done {
		e.stop, e.done, e.runErr = nil, nil, nil
	}
	return err
}

// resign is one LEADER RESIGN operation: admitted by the hooks, then releaseSettled. A rejection
// releases nothing: the lease expires after the lease duration.
func (e *Election) resign(ctx context.Context, lease *lock.Lease) error {
	ctx, sc, err := e.cfg.hooks.Begin(ctx, e.op(opResign))
	if err != nil {
		return err
	}
	err = releaseSettled(ctx, lease)
	sc.End(err)
	return err
}

// releaseSettled releases lease, calling Release again after an uncertain or transient failure until
// the outcome is known or ctx ends. Repeating is safe: the release is owner-checked, so a repeat after
// an attempt that did delete the lease reports AlreadyReleased and never touches another owner's lease
// (lock documents "call Release again to settle it"). A failure that returns at once, such as a
// connection that broke under the release (rueidis: "client is closing or unable to connect"), then
// no longer leaves the lease to expire on its own.
func releaseSettled(ctx context.Context, lease *lock.Lease) error {
	for {
		_, err := lease.Release(ctx)
		if err == nil || ctx.Err() != nil || !(errors.Is(err, lock.ErrUncertain) || luakit.IsTransient(err)) {
			return err
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
