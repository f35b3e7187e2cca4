package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
	"github.com/coordkit/coordkit/luakit/ownership"
)

// Store claims idempotency keys and stores their results through one rueidis client. Create it with
// [New]; it is safe for concurrent use by many goroutines. It runs no background work (every call does
// its I/O before returning), so it has no Close; drop it when done. The zero value is not usable. A
// Store never closes or reconfigures the caller's client.
type Store struct {
	client rueidis.Client
	cfg    config
	waiter ownership.Waiter // Begin's waiting loop; warns once per Store without working tracking
}

// New returns a Store over client. It does no I/O. It fails with an error wrapping [ErrNilClient] for
// a nil client, and with an error matching luakit.ErrInvalidConfig for an invalid option.
func New(client rueidis.Client, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("idempotency: %w", ErrNilClient)
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
	s := &Store{client: client, cfg: cfg}
	// A completion leaves the claim key in place. Where an attempt cannot arm tracking with its own
	// read (a Cluster client: see begin), KeyPersists makes the Waiter arm before each attempt, so a
	// completion between a busy attempt and the arming read is not slept through.
	s.waiter = ownership.Waiter{Client: client, Tracker: cfg.tracker, Config: &s.cfg.own,
		KeyPersists: client.Mode() == rueidis.ClientModeCluster}
	return s, nil
}

// Fingerprint is an optional digest of the request an idempotency key stands for. Its zero value,
// [NoFingerprint], means "no digest"; [FingerprintOf] wraps a digest, and FingerprintOf("") (an empty
// digest) is different from NoFingerprint. Every attempt with one key must pass the same Fingerprint;
// a different one (including none versus empty) yields [FingerprintMismatch]. A Fingerprint is a
// small comparable value, safe to copy.
type Fingerprint struct {
	set    bool
	digest string
}

// NoFingerprint is the zero Fingerprint: the caller supplies no request digest.
var NoFingerprint Fingerprint

// FingerprintOf returns the Fingerprint holding digest (any bytes, including none). Compute digest over
// the relevant request fields in a deterministic form (for example SHA-256 of a canonical encoding).
func FingerprintOf(digest string) Fingerprint { return Fingerprint{set: true, digest: digest} }

// Digest returns the digest and true, or "" and false for [NoFingerprint].
func (f Fingerprint) Digest() (string, bool) { return f.digest, f.set }

// encode is the form stored in the hash: "\x00" for none, "\x01" followed by the digest otherwise.
func (f Fingerprint) encode() string {
	if !f.set {
		return "\x00"
	}
	return "\x01" + f.digest
}

// State is the outcome of [Store.TryBegin]. Its zero value is no state: every [Attempt] returned
// without an error has one of the four constants below.
type State int

// The states of an [Attempt].
const (
	// Started means the key was free: the caller now owns a pending claim and must call
	// [Store.Complete] (or, only when no side effect can have happened, [Store.Abandon]) with
	// Attempt.OwnerToken.
	Started State = iota + 1
	// Completed means a result is stored; Attempt.Result holds it.
	Completed
	// InProgress means another owner holds a pending claim with the same fingerprint.
	InProgress
	// FingerprintMismatch means the key belongs to a request with a different fingerprint. Neither
	// its result nor its token is revealed.
	FingerprintMismatch
)

// String returns "started", "completed", "in_progress" or "fingerprint_mismatch" ("State(n)" for any
// other value).
func (s State) String() string {
	switch s {
	case Started:
		return "started"
	case Completed:
		return "completed"
	case InProgress:
		return "in_progress"
	case FingerprintMismatch:
		return "fingerprint_mismatch"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Attempt is the outcome of [Store.TryBegin] or [Store.Begin], a small value.
type Attempt struct {
	// State says which of the fields below are set.
	State State
	// OwnerToken is set only for Started: the private proof of ownership to pass to Extend,
	// Claim, Complete or Abandon. It is opaque (it encodes a random 128-bit value and the
	// generation); never log it.
	OwnerToken string
	// Result is set only for Completed: the stored result, a non-nil slice (empty for an empty
	// result) that the caller owns; it shares no memory with client buffers.
	Result []byte
	// Generation identifies the claim: the server's TIME in microseconds when it was created. Set for
	// Started, Completed (the claim that produced the result) and InProgress; 0 for FingerprintMismatch.
	// Successive claims of one key get increasing generations while the server clock does not step
	// back; pass it downstream as a fencing value if the side effect can check it.
	Generation int64
	// Remaining is set only for InProgress: the pending claim's remaining lease, after which another
	// caller can claim the key unless its owner renews it.
	Remaining time.Duration
	// Lease is set only for Started: the claim lease granted, truncated to whole milliseconds.
	Lease time.Duration
	// Deadline is set only for Started: the local estimate of when the lease ends unless renewed,
	// measured from just before the script was sent by luakit/ownership's rule (send time + Lease −
	// ownership.ServerClockStep, 1ms, or − Lease/2 for leases under 2ms), so on a correct clock it
	// never outlives the server's claim. [Claim.KeepAlive] starts from it.
	Deadline time.Time
}

// prepare validates key and the lease before any I/O and returns the physical key and the lease in
// whole ms.
func (s *Store) prepare(key string, lease time.Duration) (string, int64, error) {
	if err := validateKey(key); err != nil {
		return "", 0, err
	}
	ms, err := millis("claim lease", lease)
	if err != nil {
		return "", 0, err
	}
	return s.cfg.keys.Key(key), ms, nil
}

// millis validates a TTL (at least 1ms) and returns it in whole milliseconds; what names it in the
// error.
func millis(what string, d time.Duration) (int64, error) {
	ms := d.Milliseconds()
	if ms < 1 {
		return 0, luakit.InvalidConfigOf("idempotency", ErrInvalidTTL, "%s must be at least 1ms (got %v)", what, d)
	}
	return ms, nil
}

// estimate is the local deadline of a lease of ms milliseconds sent at start, by luakit/ownership's
// rule for a primitive without a margin of its own: start + lease − the server clock's step
// ([ownership.ServerClockStep], at most half the lease).
func estimate(start time.Time, ms int64) time.Time {
	lease := time.Duration(ms) * time.Millisecond
	return start.Add(lease - min(ownership.ServerClockStep, lease/2))
}

// validateKey rejects an empty key with an error matching luakit.ErrEmptyKey and
// luakit.ErrInvalidConfig.
func validateKey(key string) error {
	if key == "" {
		return luakit.InvalidConfigOf("idempotency", luakit.ErrEmptyKey, "key is empty")
	}
	return nil
}

// TryBegin makes one atomic attempt to claim key and returns at once; it blocks for one round trip,
// bounded by ctx.
//
// When key is free it creates a pending claim whose lease ends after lease unless its owner renews it
// ([Store.Extend], [Claim.KeepAlive]), and returns Started with the owner token, the lease and the
// local Deadline estimate. Otherwise it returns Completed with a copy of the stored result, InProgress
// while another owner's claim is pending, or FingerprintMismatch when the key was claimed with a
// different fingerprint (whatever its state; nothing about the claim is revealed). Lookups never
// change the existing claim or its expiry: a losing caller's lease is ignored.
//
// lease (at least 1ms, truncated to whole milliseconds) bounds only the pending claim: choose it a few
// round trips longer than the renewal period, or, without renewal, longer than the work. key is
// binary-safe, non-empty, and gets the Store's prefix. Errors are those every call shares (see the
// package documentation, "Errors"), and [ErrNoPermission], nothing written, when the client's ACL
// user could not finish the claim (see the package documentation, "Servers").
func (s *Store) TryBegin(ctx context.Context, key string, lease time.Duration, fp Fingerprint) (Attempt, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opTryBegin))
	if err != nil {
		return Attempt{}, err
	}
	v, err := s.tryBegin(ctx, key, lease, fp)
	sc.End(err)
	return v, err
}

// tryBegin is [Store.TryBegin], run inside its hook scope.
func (s *Store) tryBegin(ctx context.Context, key string, lease time.Duration, fp Fingerprint) (res Attempt, err error) {
	k, ms, err := s.prepare(key, lease)
	if err != nil {
		return Attempt{}, err
	}
	a, _, _, err := s.begin(ctx, k, ms, fp, false)
	return a, err
}

// begin is one attempt to claim the physical key k. With track it is sent through
// [ownership.SendTracked]: when the claim is in progress, the script's own reads of k then make the
// server track k for this client (tracked true), so a waiting Begin sleeps without an arming read.
// holderTTL is, for InProgress, the claim's remaining lease as the script read it (negative for a
// claim without expiry).
func (s *Store) begin(ctx context.Context, k string, ms int64, fp Fingerprint, track bool) (_ Attempt, holderTTL time.Duration, tracked bool, _ error) {
	secret := luakit.OwnerToken()
	keys, args := []string{k}, []string{secret, strconv.FormatInt(ms, 10), fp.encode()}
	var sent ownership.Sent
	switch {
	case track:
		sent = s.cfg.own.SendTracked(ctx, beginScript, s.client, keys, args)
	case s.cfg.own.Ack.Enabled():
		sent = s.cfg.own.Send(ctx, beginScript, s.client, keys, args)
	default:
		sent = ownership.Sent{Start: time.Now(), Resp: beginScript.Exec(ctx, s.client, keys, args)}
	}
	a, holderTTL, err := decodeBegin(sent.Resp, secret, sent.Start, ms)
	if err == nil && a.State == Started && sent.Ack != nil {
		// Claimed on the primary but not acknowledged (WithReplicaAck): not a claim. Give it back.
		s.abandonUnacknowledged(ctx, k, a.OwnerToken)
		return Attempt{}, 0, false, fmt.Errorf("idempotency: begin: %w", sent.Ack)
	}
	return a, holderTTL, sent.Tracked && err == nil && a.State == InProgress, err
}

// abandonUnacknowledged deletes the claim that an unacknowledged begin made (owner-checked, on the
// connection the begin used, bounded by the cleanup timeout and surviving ctx's cancellation); a
// failure is logged and the claim then ends with its lease.
func (s *Store) abandonUnacknowledged(ctx context.Context, k, ownerToken string) {
	secret, gen, err := parseToken(ownerToken)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		ctx, stop := luakit.WithoutDeadline(ctx)
		defer stop()
		_, err = abandonScript.ExecOrdered(ctx, s.client, []string{k}, []string{secret, gen}).AsInt64()
	}
	if err != nil {
		logger := s.cfg.own.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("idempotency: abandoning an unacknowledged claim failed; it ends with its lease", "err", err)
	}
}

// decodeBegin reads begin.lua's reply to an attempt with owner token secret sent at start.
func decodeBegin(resp rueidis.RedisResult, secret string, start time.Time, ms int64) (Attempt, time.Duration, error) {
	arr, err := resp.ToArray()
	if err != nil {
		return Attempt{}, 0, wrap("begin", err)
	}
	if len(arr) == 0 {
		return Attempt{}, 0, errors.New("idempotency: begin: empty reply")
	}
	status, err := arr[0].AsInt64()
	if err != nil {
		return Attempt{}, 0, fmt.Errorf("idempotency: begin: status: %w", err)
	}
	if status == luakit.StatusMismatch {
		return Attempt{State: FingerprintMismatch}, 0, nil
	}
	if status == luakit.StatusForeign {
		return Attempt{}, 0, fmt.Errorf("idempotency: begin: %w", ErrForeignData)
	}
	if len(arr) < 2 {
		return Attempt{}, 0, fmt.Errorf("idempotency: begin: reply of %d elements for status %d", len(arr), status)
	}
	gen, err := luakit.Int64(arr[1])
	if err != nil || gen <= 0 {
		if status == luakit.StatusCompleted || status == luakit.StatusBusy {
			// Read from the hash: a generation begin.lua never writes.
			return Attempt{}, 0, fmt.Errorf("idempotency: begin: %w (generation is not a positive decimal)", ErrForeignData)
		}
		return Attempt{}, 0, fmt.Errorf("idempotency: begin: generation: %w", errOr(err, luakit.ErrMalformedInt))
	}
	switch status {
	case luakit.StatusOK:
		return Attempt{State: Started, OwnerToken: secret + "." + strconv.FormatInt(gen, 10), Generation: gen,
			Lease: time.Duration(ms) * time.Millisecond, Deadline: estimate(start, ms)}, 0, nil
	case luakit.StatusCompleted:
		if len(arr) != 3 {
			return Attempt{}, 0, errors.New("idempotency: begin: completed reply without result")
		}
		r, err := arr[2].ToString()
		if err != nil {
			return Attempt{}, 0, fmt.Errorf("idempotency: begin: result: %w", err)
		}
		// []byte(r) copies: the caller's slice never aliases a client buffer.
		return Attempt{State: Completed, Result: append(make([]byte, 0, len(r)), r...), Generation: gen}, 0, nil
	case luakit.StatusBusy:
		if len(arr) != 3 {
			return Attempt{}, 0, errors.New("idempotency: begin: in-progress reply without pttl")
		}
		pttl, err := arr[2].AsInt64()
		if err != nil {
			return Attempt{}, 0, fmt.Errorf("idempotency: begin: pttl: %w", err)
		}
		holder := time.Duration(pttl) * time.Millisecond // -1: no expiry
		return Attempt{State: InProgress, Generation: gen, Remaining: max(holder, 0)}, holder, nil
	}
	return Attempt{}, 0, fmt.Errorf("idempotency: begin: unexpected status %d", status)
}

// wrap classifies a script failure: uncertain ones wrap ErrUncertain.
func wrap(op string, err error) error {
	if luakit.IsUncertain(err) {
		return fmt.Errorf("idempotency: %s: %w: %w", op, ErrUncertain, err)
	}
	return fmt.Errorf("idempotency: %s: %w", op, err)
}

func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// parseToken splits an owner token into its random part and generation.
func parseToken(token string) (secret, gen string, err error) {
	i := strings.LastIndexByte(token, '.')
	if i != 32 {
		return "", "", ErrInvalidToken
	}
	secret, gen = token[:i], token[i+1:]
	for j := 0; j < len(secret); j++ {
		c := secret[j]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", "", ErrInvalidToken
		}
	}
	if g, perr := luakit.ParseInt64(gen); perr != nil || g <= 0 {
		return "", "", ErrInvalidToken
	}
	return secret, gen, nil
}

// Complete stores result for key's pending claim if ownerToken (from a Started [Attempt]) still owns
// it, and reports whether it did; it blocks for one round trip, bounded by ctx. On success the claim
// becomes completed, later attempts with the same fingerprint get a copy of result, and the key
// expires after retention, whatever lease the claim had.
//
// It returns false, writing nothing, when the claim is no longer this owner's: its lease ended (and
// perhaps another caller claimed the key: a late completion never overwrites a newer claim or result),
// it was abandoned, or it was already completed (a second completion keeps the first result and its
// expiry). result may be empty or nil (stored as empty) and hold any bytes; it is copied before any
// I/O, so the caller may reuse it; the store imposes no size limit. retention (at least 1ms, truncated
// to whole milliseconds) should outlast the clients' retry window (idemhttp's default is 24h).
//
// Errors are those every call shares (see the package documentation, "Errors"), and
// [ErrInvalidToken] before any I/O. After an [ErrUncertain] check the outcome with TryBegin or Inspect.
func (s *Store) Complete(ctx context.Context, key, ownerToken string, result []byte, retention time.Duration) (bool, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opComplete))
	if err != nil {
		return false, err
	}
	v, err := s.complete(ctx, key, ownerToken, result, retention)
	sc.End(err)
	return v, err
}

// complete is [Store.Complete], run inside its hook scope.
func (s *Store) complete(ctx context.Context, key, ownerToken string, result []byte, retention time.Duration) (ok bool, err error) {
	k, secret, gen, err := s.prepareOwned(key, ownerToken)
	if err != nil {
		return false, err
	}
	ms, err := millis("retention", retention)
	if err != nil {
		return false, err
	}
	keys, args := []string{k}, []string{secret, gen, string(result), strconv.FormatInt(ms, 10)}
	if !s.cfg.own.Ack.Enabled() {
		n, err := completeScript.Exec(ctx, s.client, keys, args).AsInt64()
		if err != nil {
			return false, wrap("complete", err)
		}
		return owned("complete", n)
	}
	if err := s.cfg.own.CheckAck(ctx, s.client); err != nil {
		return false, wrap("complete", err)
	}
	resp, ackErr := completeScript.ExecOrderedAck(ctx, s.client, s.cfg.own.Ack, keys, args)
	n, err := resp.AsInt64()
	if err != nil {
		return false, wrap("complete", err)
	}
	if ok, err := owned("complete", n); !ok || err != nil {
		return ok, err
	}
	if ackErr != nil {
		return false, wrap("complete", ackErr) // stored on the primary; may not survive a failover
	}
	return true, nil
}

// Extend renews key's pending claim for lease, counted on the server from when the script runs, if
// ownerToken still owns it, and reports whether it did. Use it (or [Claim.KeepAlive], which calls it
// periodically) while work outlives the lease granted by TryBegin. It returns false, writing nothing,
// when the claim is no longer this owner's pending claim (its lease ended, it was abandoned, replaced
// or completed: a stored result's retention is never changed): the work is then no longer protected
// against a duplicate.
//
// lease is truncated to whole milliseconds and must be at least 1ms. Errors: [ErrInvalidToken],
// [ErrInvalidTTL] or an empty-key error before I/O (all match luakit.ErrInvalidConfig); an error
// wrapping [ErrUncertain] when no reply was read (the renewal may still run; the claim's expiry is
// then at least what it was); an error wrapping [ErrForeignData] for another Redis type at the key; or
// a server or connection error (the claim is unchanged). It blocks for one round trip, bounded by ctx.
func (s *Store) Extend(ctx context.Context, key, ownerToken string, lease time.Duration) (bool, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opExtend))
	if err != nil {
		return false, err
	}
	v, err := s.extendOp(ctx, key, ownerToken, lease)
	sc.End(err)
	return v, err
}

// extendOp is [Store.Extend], run inside its hook scope.
func (s *Store) extendOp(ctx context.Context, key, ownerToken string, lease time.Duration) (ok bool, err error) {
	k, secret, gen, err := s.prepareOwned(key, ownerToken)
	if err != nil {
		return false, err
	}
	ms, err := millis("claim lease", lease)
	if err != nil {
		return false, err
	}
	return s.extend(ctx, k, secret, gen, ms)
}

func (s *Store) extend(ctx context.Context, k, secret, gen string, ms int64) (bool, error) {
	keys, args := []string{k}, []string{secret, gen, strconv.FormatInt(ms, 10)}
	if !s.cfg.own.Ack.Enabled() {
		n, err := extendScript.Exec(ctx, s.client, keys, args).AsInt64()
		if err != nil {
			return false, wrap("extend", err)
		}
		return owned("extend", n)
	}
	if err := s.cfg.own.CheckAck(ctx, s.client); err != nil {
		return false, wrap("extend", err)
	}
	resp, ackErr := extendScript.ExecOrderedAck(ctx, s.client, s.cfg.own.Ack, keys, args)
	n, err := resp.AsInt64()
	if err != nil {
		return false, wrap("extend", err)
	}
	if ok, err := owned("extend", n); !ok || err != nil {
		return ok, err
	}
	if ackErr != nil {
		return false, wrap("extend", ackErr) // renewed on the primary; may not survive a failover
	}
	return true, nil
}

// Abandon deletes key's claim if it is still pending and owned by ownerToken, and reports whether it
// did; afterwards any caller can claim the key again. It returns false, writing nothing, for a
// completed, expired, replaced or already abandoned claim.
//
// Use it only when the work is safe to run again or when no side effect can have happened. Do not
// abandon automatically after an error or panic if an external side effect may already have happened:
// a duplicate would then run the side effect again. Leave the claim to expire instead.
//
// Errors as for [Store.Complete] (foreign data: another Redis type at the key). It blocks for one
// round trip, bounded by ctx.
func (s *Store) Abandon(ctx context.Context, key, ownerToken string) (bool, error) {
	ctx, sc, err := s.cfg.hooks.Begin(ctx, s.op(opAbandon))
	if err != nil {
		return false, err
	}
	v, err := s.abandon(ctx, key, ownerToken)
	sc.End(err)
	return v, err
}

// abandon is [Store.Abandon], run inside its hook scope.
func (s *Store) abandon(ctx context.Context, key, ownerToken string) (ok bool, err error) {
	k, secret, gen, err := s.prepareOwned(key, ownerToken)
	if err != nil {
		return false, err
	}
	n, err := abandonScript.Exec(ctx, s.client, []string{k}, []string{secret, gen}).AsInt64()
	if err != nil {
		return false, wrap("abandon", err)
	}
	return owned("abandon", n)
}

func (s *Store) prepareOwned(key, ownerToken string) (k, secret, gen string, err error) {
	if err := validateKey(key); err != nil {
		return "", "", "", err
	}
	secret, gen, err = parseToken(ownerToken)
	if err != nil {
		return "", "", "", err
	}
	return s.cfg.keys.Key(key), secret, gen, nil
}

// owned reads the status of a script that acts on this owner's (or, for force abandon, any owner's)
// pending claim: true for ok; false for absent (-1) or not this owner's pending claim (-2); an error
// wrapping ErrForeignData for a key of another type (-3).
func owned(op string, n int64) (bool, error) {
	switch n {
	case luakit.StatusOK:
		return true, nil
	case luakit.StatusAbsent, luakit.StatusNotOwner:
		return false, nil
	case luakit.StatusForeign:
		return false, fmt.Errorf("idempotency: %s: %w", op, ErrForeignData)
	}
	return false, fmt.Errorf("idempotency: %s: unexpected status %d", op, n)
}
