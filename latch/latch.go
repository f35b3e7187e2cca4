package latch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Latches creates, joins and resets countdown latches through one rueidis client. Create it with
// [New]; it is safe for concurrent use by many goroutines. It owns no goroutine except while a
// [Latch.Wait] is blocked (one Pub/Sub receiver per waited-on key, shared by the waiters of that key
// and stopped when the last of them returns). The zero value is not usable.
//
// Latches never closes or reconfigures the caller's client.
type Latches struct {
	client rueidis.Client
	cfg    config
	hub    hub
}

// New returns Latches over client. It does no I/O. It fails with an error wrapping [ErrNilClient] for
// a nil client, and with an error matching luakit.ErrInvalidConfig for an invalid option.
func New(client rueidis.Client, opts ...Option) (*Latches, error) {
	if client == nil {
		return nil, fmt.Errorf("latch: %w", ErrNilClient)
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
	ls := &Latches{client: client, cfg: cfg}
	ls.hub.init(ls)
	return ls, nil
}

// Latch is a handle on one generation of a latch. It is returned by [Latches.Create],
// [Latches.Reset] and [Latches.Join]; every operation through it applies only to its generation, so
// a handle held across a Reset can never touch the new generation. A Latch is a small immutable value
// behind a pointer, safe for concurrent use.
type Latch struct {
	ls         *Latches
	key        string // logical key, as given
	pkey       string // physical key (prefixed)
	gen        string
	initial    int64
	expiresAtM int64 // server-time deadline in Unix ms; 0 for none
}

// Key returns the latch's key as passed to Create, Reset or Join (without the prefix).
func (l *Latch) Key() string { return l.key }

// Generation returns the generation id: 32 hexadecimal characters, unique per Create or Reset.
func (l *Latch) Generation() string { return l.gen }

// Initial returns the count the generation started with.
func (l *Latch) Initial() int64 { return l.initial }

// ExpiresAt returns the generation's expiry deadline as computed on the server's clock (see
// [WithExpiry]), or the zero Time when the latch does not expire.
func (l *Latch) ExpiresAt() time.Time {
	if l.expiresAtM == 0 {
		return time.Time{}
	}
	return time.UnixMilli(l.expiresAtM)
}

// physical checks a key and returns its physical form. It does no I/O. An empty key's error matches
// luakit.ErrEmptyKey and luakit.ErrInvalidConfig.
func (ls *Latches) physical(key string) (string, error) {
	if key == "" {
		return "", luakit.InvalidConfigOf("latch", luakit.ErrEmptyKey, "key is empty")
	}
	return ls.cfg.keys.Key(key), nil
}

// Create starts a latch at key with count pending signals, failing when one already exists.
//
// count must be ≥ 0 (0 creates an already complete latch, whose waiters return nil at once). key is
// binary-safe, gets the prefix, and needs no hash tag on Cluster. Options: [WithExpiry]. Invalid
// input (an empty key, [ErrInvalidCount], [ErrInvalidExpiry]) fails before any I/O with an error
// matching luakit.ErrInvalidConfig.
//
// It returns the new generation's handle, or a nil Latch and: [ErrExists] when the key holds a latch
// (nothing written); an error wrapping [ErrForeignData] when it holds anything else (nothing
// written); an error wrapping [ErrUncertain] when the script may have run but no reply was read (the
// latch may exist); a server or connection error. It blocks for one round trip, bounded by ctx.
func (ls *Latches) Create(ctx context.Context, key string, count int64, opts ...CreateOption) (*Latch, error) {
	ctx, sc, err := ls.cfg.hooks.Begin(ctx, ls.op(opCreate))
	if err != nil {
		return nil, err
	}
	v, err := ls.createOp(ctx, key, count, opts...)
	ls.endAnswer(&sc, err)
	return v, err
}

// createOp is [Latches.Create], run inside its hook scope.
func (ls *Latches) createOp(ctx context.Context, key string, count int64, opts ...CreateOption) (l *Latch, err error) {
	return ls.create(ctx, "create", key, count, opts)
}

// Reset creates or replaces the latch at key: it starts a new generation with count pending signals
// (count ≥ 0; 0 is already complete) and wakes the waiters of the replaced generation: their Wait,
// CountDown, Count and Abort return [ErrReplaced] (Wait returns nil if their generation had already
// reached zero). Late signals from the old generation can never decrement the new one. The new
// generation keeps nothing of the old (no expiry unless [WithExpiry] is given).
//
// Errors are those of [Latches.Create], except that an existing latch is replaced rather than
// reported. A key that holds anything that is not a latch is never replaced ([ErrForeignData]).
func (ls *Latches) Reset(ctx context.Context, key string, count int64, opts ...CreateOption) (*Latch, error) {
	ctx, sc, err := ls.cfg.hooks.Begin(ctx, ls.op(opReset))
	if err != nil {
		return nil, err
	}
	v, err := ls.reset(ctx, key, count, opts...)
	ls.endAnswer(&sc, err)
	return v, err
}

// reset is [Latches.Reset], run inside its hook scope.
func (ls *Latches) reset(ctx context.Context, key string, count int64, opts ...CreateOption) (l *Latch, err error) {
	return ls.create(ctx, "reset", key, count, opts)
}

func (ls *Latches) create(ctx context.Context, mode, key string, count int64, opts []CreateOption) (*Latch, error) {
	pkey, err := ls.physical(key)
	if err != nil {
		return nil, err
	}
	if count < 0 {
		return nil, luakit.InvalidConfigOf("latch", ErrInvalidCount, "count must not be negative (got %d)", count)
	}
	var cc createConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyCreate(&cc); err != nil {
			return nil, err
		}
	}
	gen := luakit.OwnerToken()
	resp := createScript.Exec(ctx, ls.client, []string{pkey},
		[]string{mode, gen, luakit.FormatInt64(count), luakit.FormatInt64(cc.expiryMS)})
	arr, err := resp.ToArray()
	if err != nil {
		return nil, opError(mode, err)
	}
	status, err := statusOf(arr)
	if err != nil {
		return nil, fmt.Errorf("latch: %s: %w", mode, err)
	}
	switch status {
	case luakit.StatusOK:
		m, err := second(arr)
		if err != nil {
			return nil, fmt.Errorf("latch: %s: %w", mode, err)
		}
		exp, err := luakit.Int64(m)
		if err != nil {
			return nil, fmt.Errorf("latch: %s: expiry: %w", mode, err)
		}
		return &Latch{ls: ls, key: key, pkey: pkey, gen: gen, initial: count, expiresAtM: exp}, nil
	case luakit.StatusBusy:
		return nil, ErrExists
	case luakit.StatusForeign:
		return nil, fmt.Errorf("latch: %s: %w", mode, ErrForeignData)
	}
	return nil, fmt.Errorf("latch: %s: unexpected status %d", mode, status)
}

// Join returns a handle on the current generation of the latch at key.
//
// It returns [ErrNotFound] when no latch exists at key, an error wrapping [ErrForeignData] when the
// key holds anything else, and an [*AbortedError] (wrapping [ErrAborted], with the stored reason) when
// the current generation was aborted. A joined complete generation is returned normally (its Wait
// returns nil at once). An empty key fails before any I/O with an error matching
// luakit.ErrInvalidConfig. It reads only; it blocks for one round trip, bounded by ctx.
func (ls *Latches) Join(ctx context.Context, key string) (*Latch, error) {
	ctx, sc, err := ls.cfg.hooks.Begin(ctx, ls.op(opJoin))
	if err != nil {
		return nil, err
	}
	v, err := ls.join(ctx, key)
	ls.endAnswer(&sc, err)
	return v, err
}

// join is [Latches.Join], run inside its hook scope.
func (ls *Latches) join(ctx context.Context, key string) (l *Latch, err error) {
	pkey, err := ls.physical(key)
	if err != nil {
		return nil, err
	}
	st, err := ls.readState(ctx, pkey)
	if err != nil {
		return nil, fmt.Errorf("latch: join: %w", err)
	}
	switch st.kind {
	case "none":
		return nil, ErrNotFound
	case "other":
		return nil, fmt.Errorf("latch: join: %w", ErrForeignData)
	}
	if st.aborted {
		return nil, &AbortedError{Reason: st.reason}
	}
	return &Latch{ls: ls, key: key, pkey: pkey, gen: st.gen, initial: st.initial, expiresAtM: st.expires}, nil
}

// CountDown signals the generation once: it decrements the count by one and, when it reaches zero,
// wakes every waiter. It returns the remaining count (≥ 0).
//
// When it refuses the signal it writes nothing and returns 0 and: [ErrReplaced] when the key no longer
// holds this generation (a Reset replaced it or the latch was deleted), so late signals never
// decrement a newer generation; [ErrCompleted] when the count was already zero; an [*AbortedError]
// when the generation was aborted; [ErrLatchExpired] when the latch expired; an error wrapping
// [ErrForeignData]. An error wrapping [ErrUncertain] means the signal may or may not have been
// applied (a cancelled CountDown may still have run). It blocks for one round trip, bounded by ctx.
func (l *Latch) CountDown(ctx context.Context) (int64, error) {
	ctx, sc, err := l.ls.cfg.hooks.Begin(ctx, l.ls.op(opCountDown))
	if err != nil {
		return 0, err
	}
	v, err := l.countDown(ctx)
	l.ls.endAnswer(&sc, err)
	return v, err
}

// countDown is [Latch.CountDown], run inside its hook scope.
func (l *Latch) countDown(ctx context.Context) (n int64, err error) {
	arr, err := countDownScript.Exec(ctx, l.ls.client, []string{l.pkey}, []string{l.gen}).ToArray()
	if err != nil {
		return 0, opError("count down", err)
	}
	return l.countDownReply(arr)
}

// countDownReply decodes the reply of countdown.lua.
func (l *Latch) countDownReply(arr []rueidis.RedisMessage) (int64, error) {
	status, err := statusOf(arr)
	if err != nil {
		return 0, fmt.Errorf("latch: count down: %w", err)
	}
	switch status {
	case luakit.StatusOK:
		m, err := second(arr)
		if err != nil {
			return 0, fmt.Errorf("latch: count down: %w", err)
		}
		n, err := luakit.Int64(m)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("latch: count down: remaining: %w", errOr(err, luakit.ErrMalformedInt))
		}
		return n, nil
	case luakit.StatusNotOwner:
		return 0, ErrReplaced
	case luakit.StatusAbsent:
		if l.expired(arr) {
			return 0, ErrLatchExpired
		}
		return 0, ErrReplaced
	case luakit.StatusAborted:
		return 0, abortedFrom(arr)
	case luakit.StatusCompleted:
		return 0, ErrCompleted
	case luakit.StatusForeign:
		return 0, fmt.Errorf("latch: count down: %w", ErrForeignData)
	}
	return 0, fmt.Errorf("latch: count down: unexpected status %d", status)
}

// Count returns the generation's remaining count (0 once complete). It returns [ErrReplaced] when the
// key no longer holds this generation, [ErrLatchExpired] when the latch expired, an [*AbortedError]
// when the generation was aborted, and an error wrapping [ErrForeignData] when the key holds anything
// that is not a latch. It reads only; it blocks for one round trip, bounded by ctx.
func (l *Latch) Count(ctx context.Context) (int64, error) {
	ctx, sc, err := l.ls.cfg.hooks.Begin(ctx, l.ls.op(opCount))
	if err != nil {
		return 0, err
	}
	v, err := l.count(ctx)
	l.ls.endAnswer(&sc, err)
	return v, err
}

// count is [Latch.Count], run inside its hook scope.
func (l *Latch) count(ctx context.Context) (n int64, err error) {
	st, err := l.ls.readState(ctx, l.pkey)
	if err != nil {
		return 0, fmt.Errorf("latch: count: %w", err)
	}
	switch {
	case st.kind == "other":
		return 0, fmt.Errorf("latch: count: %w", ErrForeignData)
	case st.kind == "latch" && st.gen == l.gen && st.aborted:
		return 0, &AbortedError{Reason: st.reason}
	case st.kind == "latch" && st.gen == l.gen:
		return st.count, nil
	case st.kind == "none" && l.expiresAtM != 0 && st.now >= l.expiresAtM:
		return 0, ErrLatchExpired
	}
	return 0, ErrReplaced
}

// Abort fails the generation: every waiter returns an [*AbortedError] carrying reason, and so do later
// Join, CountDown and Count calls (the reason is stored in the latch and published). The count is
// left as it was. reason is free text (may be empty) of at most [MaxAbortReasonLength] (1024) bytes,
// else Abort returns [ErrReasonTooLong] before any I/O; do not put secrets in it.
//
// It returns nil when it aborted the generation now. Otherwise nothing was written and it returns:
// the [*AbortedError] of an earlier Abort (with its reason); [ErrCompleted] when the count had already
// reached zero; [ErrReplaced] when the key holds another generation or nothing; [ErrLatchExpired]; an
// error wrapping [ErrForeignData]; or an error wrapping [ErrUncertain]. It blocks for one round trip,
// bounded by ctx.
func (l *Latch) Abort(ctx context.Context, reason string) error {
	ctx, sc, err := l.ls.cfg.hooks.Begin(ctx, l.ls.op(opAbort))
	if err != nil {
		return err
	}
	err = l.abort(ctx, reason)
	l.ls.endAnswer(&sc, err)
	return err
}

// abort is [Latch.Abort], run inside its hook scope.
func (l *Latch) abort(ctx context.Context, reason string) (err error) {
	if len(reason) > MaxAbortReasonLength {
		return ErrReasonTooLong
	}
	arr, err := abortScript.Exec(ctx, l.ls.client, []string{l.pkey}, []string{l.gen, reason}).ToArray()
	if err != nil {
		return opError("abort", err)
	}
	status, err := statusOf(arr)
	if err != nil {
		return fmt.Errorf("latch: abort: %w", err)
	}
	switch status {
	case luakit.StatusOK:
		return nil
	case luakit.StatusNotOwner:
		return ErrReplaced
	case luakit.StatusAbsent:
		if l.expired(arr) {
			return ErrLatchExpired
		}
		return ErrReplaced
	case luakit.StatusAborted:
		return abortedFrom(arr)
	case luakit.StatusCompleted:
		return ErrCompleted
	case luakit.StatusForeign:
		return fmt.Errorf("latch: abort: %w", ErrForeignData)
	}
	return fmt.Errorf("latch: abort: unexpected status %d", status)
}

// Delete removes the latch when the key still holds this generation, and wakes its waiters (their
// Wait returns [ErrReplaced], or nil if it had read the count as zero first). It reports whether it
// deleted the key; false means the key holds another generation or nothing (already deleted,
// expired or replaced), and nothing was written. Unlike CountDown it does not report that as
// [ErrReplaced]: Delete is cleanup, and "already gone" is its goal reached, so a deferred Delete
// needs no error check for it. An error wrapping [ErrForeignData] means the key holds anything that
// is not a latch (left alone); one wrapping [ErrUncertain] means the key may or may not be gone. It
// blocks for one round trip, bounded by ctx.
func (l *Latch) Delete(ctx context.Context) (bool, error) {
	ctx, sc, err := l.ls.cfg.hooks.Begin(ctx, l.ls.op(opDelete))
	if err != nil {
		return false, err
	}
	v, err := l.delete(ctx)
	l.ls.endAnswer(&sc, err)
	return v, err
}

// delete is [Latch.Delete], run inside its hook scope.
func (l *Latch) delete(ctx context.Context) (ok bool, err error) {
	return l.del(ctx)
}

// del is Delete without admission (ForceDelete uses it).
func (l *Latch) del(ctx context.Context) (bool, error) {
	n, err := deleteScript.Exec(ctx, l.ls.client, []string{l.pkey}, []string{l.gen}).AsInt64()
	if err != nil {
		return false, opError("delete", err)
	}
	switch n {
	case luakit.StatusForeign:
		return false, fmt.Errorf("latch: delete: %w", ErrForeignData)
	case luakit.StatusOK:
		return true, nil
	case luakit.StatusAbsent, luakit.StatusNotOwner:
		return false, nil
	}
	return false, fmt.Errorf("latch: delete: unexpected status %d", n)
}

// expired reports whether an {absent, now} reply shows this generation's expiry deadline has passed.
func (l *Latch) expired(arr []rueidis.RedisMessage) bool {
	if l.expiresAtM == 0 || len(arr) < 2 {
		return false
	}
	now, err := luakit.Int64(arr[1])
	return err == nil && now >= l.expiresAtM
}

func abortedFrom(arr []rueidis.RedisMessage) error {
	reason := ""
	if len(arr) > 1 {
		reason, _ = arr[1].ToString()
	}
	return &AbortedError{Reason: reason}
}

func statusOf(arr []rueidis.RedisMessage) (int64, error) {
	if len(arr) == 0 {
		return 0, errors.New("empty reply")
	}
	s, err := arr[0].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("status: %w", err)
	}
	return s, nil
}

// second returns the element after the status, or an error for a short reply.
func second(arr []rueidis.RedisMessage) (rueidis.RedisMessage, error) {
	if len(arr) < 2 {
		return rueidis.RedisMessage{}, fmt.Errorf("reply of %d elements lacks a value", len(arr))
	}
	return arr[1], nil
}

// opError wraps err from a writing script: uncertain outcomes wrap ErrUncertain.
func opError(op string, err error) error {
	if luakit.IsUncertain(err) {
		return fmt.Errorf("latch: %s: %w: %w", op, ErrUncertain, err)
	}
	return fmt.Errorf("latch: %s: %w", op, err)
}
