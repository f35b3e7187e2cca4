package idemhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/luakit"
)

// Header names.
const (
	// HeaderKey is the request header carrying the idempotency key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on every replayed response.
	HeaderReplayed = "Idempotent-Replayed"
)

// MaxKeyLength is the longest accepted idempotency key, in bytes after unquoting.
const MaxKeyLength = 255

// Middleware applies idempotency keys to HTTP handlers. Create it with [New]; it is safe for
// concurrent use and may wrap many handlers (all share its options; use several Middlewares for
// per-route settings).
type Middleware struct {
	store   *idempotency.Store
	cfg     config
	counter *counter
}

// New returns a Middleware storing claims and responses in store. It does no I/O. It fails for a nil
// store, an invalid option, or when neither [WithScope] nor [WithSharedScope](true) is given
// (a middleware that silently shared responses between callers would replay one caller's response to
// another), with an error matching luakit.ErrInvalidConfig.
func New(store *idempotency.Store, opts ...Option) (*Middleware, error) {
	if store == nil {
		return nil, luakit.InvalidConfig("idemhttp", "nil store")
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
	if cfg.sharedScope {
		cfg.scope = sharedScope
	}
	if cfg.scope == nil {
		return nil, luakit.InvalidConfig("idemhttp", "no scope: pass WithScope (one scope per caller) or WithSharedScope(true) (every caller shares stored responses)")
	}
	c, err := newCounter(cfg.meterProvider, cfg.instance)
	if err != nil {
		return nil, err
	}
	return &Middleware{store: store, cfg: cfg, counter: c}, nil
}

// ParseKey parses an Idempotency-Key header value: a Structured Field string ("..." with \" and \\
// escapes, as the IETF draft specifies) or, leniently, a bare run of visible ASCII characters. The
// key must be 1 to [MaxKeyLength] bytes. Its errors start with "idemhttp: " and say what is wrong
// without quoting the value. They report a client's malformed header (the middleware answers 400),
// not the program's configuration, so they do not match luakit.ErrInvalidConfig.
func ParseKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		i := 1
		closed := false
		for ; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '\\':
				i++
				if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", errors.New("idemhttp: bad escape in key")
				}
				b.WriteByte(v[i])
			case c == '"':
				closed = true
			case c < 0x20 || c > 0x7e:
				return "", errors.New("idemhttp: key holds a non-printable byte")
			default:
				b.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed || i != len(v)-1 {
			return "", errors.New("idemhttp: unterminated or trailing data in quoted key")
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if v[i] <= 0x20 || v[i] > 0x7e || v[i] == '"' {
				return "", errors.New("idemhttp: key holds a byte outside visible ASCII")
			}
		}
		key = v
	}
	if len(key) == 0 || len(key) > MaxKeyLength {
		return "", fmt.Errorf("idemhttp: key length %d outside 1..%d", len(key), MaxKeyLength)
	}
	return key, nil
}

// lp appends a length-prefixed field, so concatenations cannot collide.
func lp(h io.Writer, s string) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	io.WriteString(h, s)
}

// ClaimKey returns the [idempotency.Store] key under which the middleware claims a request: "idemhttp:"
// followed by the hex SHA-256 of the length-prefixed scope (what [WithScope]'s function returned),
// method, escaped path (r.URL.EscapedPath()) and idempotency key (as [ParseKey] returned it). The
// Store's key prefix ([idempotency.WithKeyPrefix]) is added by the Store, not here: pass the result to
// the same Store's [idempotency.Store.Inspect] to find a request's claim, or prepend the prefix to get
// the physical Redis key. It is a pure function, safe for concurrent use; its output is stable across
// releases of v0 unless the changelog says otherwise.
func ClaimKey(scope, method, path, key string) string {
	h := sha256.New()
	lp(h, scope)
	lp(h, method)
	lp(h, path)
	lp(h, key)
	return "idemhttp:" + hex.EncodeToString(h.Sum(nil))
}

// DefaultFingerprint is the default of [WithFingerprint]: the hex SHA-256 of the length-prefixed
// method, escaped path and raw query of r, followed by the body bytes. Two requests are the same only
// if their bodies are byte for byte equal. It never fails.
func DefaultFingerprint(r *http.Request, body []byte) (string, error) {
	return fingerprint(r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body), nil
}

func fingerprint(method, path, query string, body []byte) string {
	h := sha256.New()
	lp(h, method)
	lp(h, path)
	lp(h, query)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// DoNotStore marks the response being written through w as not to be stored: the middleware serves
// it, does not store it, and abandons the claim when the handler returns, so a retry with the same key
// runs the handler again. Call it from the handler (before it returns) only for a response of a
// request with no side effect, for example a validation error the client may fix, or a temporary
// refusal. It reports whether w belongs to this package's middleware (directly, or through wrappers
// with an Unwrap() http.ResponseWriter method); it does nothing otherwise. It must be called from the
// handler's goroutine.
func DoNotStore(w http.ResponseWriter) bool {
	for w != nil {
		if rc, ok := w.(*recorder); ok {
			rc.noStore = true
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
	return false
}

// problem writes an RFC 9457 problem response.
func problem(w http.ResponseWriter, status int, title string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"title":%s,"status":%d}`, strconv.Quote(title), status)
}

// Handler wraps next, answering each request as the package documentation's Behaviour table says
// (400, 409, 413, 422, 500, 503, a replay with Idempotent-Replayed: true, or next run under a claim).
// Keys are scoped by the caller ([WithScope]), the method and the path ([ClaimKey]); error responses
// are application/problem+json. next's request context is cancelled, with context.Cause
// [idempotency.ErrLost] or [idempotency.ErrExpired], if its claim can no longer be kept alive (a
// duplicate may then run); the claim is renewed while next runs even after the client has gone. A
// response too large to store, or a panic in next (re-raised), leaves the claim pending until its
// lease ends (a panic abandons it with [WithAbandonOnPanic]).
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	values := r.Header.Values(HeaderKey)
	if len(values) == 0 {
		if m.cfg.required(r) {
			m.counter.count(OutcomeRejected)
			problem(w, http.StatusBadRequest, "Idempotency-Key header is required")
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	if len(values) > 1 {
		m.counter.count(OutcomeRejected)
		problem(w, http.StatusBadRequest, "Idempotency-Key header must appear once")
		return
	}
	key, err := ParseKey(values[0])
	if err != nil {
		m.counter.count(OutcomeRejected)
		problem(w, http.StatusBadRequest, "Idempotency-Key header is malformed")
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, m.cfg.maxRequest+1))
		r.Body.Close()
		if err != nil {
			m.counter.count(OutcomeRejected)
			problem(w, http.StatusBadRequest, "request body could not be read")
			return
		}
		if int64(len(body)) > m.cfg.maxRequest {
			m.counter.count(OutcomeRejected)
			problem(w, http.StatusRequestEntityTooLarge, "request body too large for an idempotent request")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	scope, err := m.cfg.scope(r)
	if err != nil {
		m.cfg.logger.Error("coordkit/idemhttp: scope function failed; request rejected without claiming", "error", err)
		m.counter.count(OutcomeRejected)
		problem(w, http.StatusInternalServerError, "request could not be scoped for idempotency")
		return
	}
	digest, err := m.cfg.fingerprint(r, body)
	if err != nil {
		m.cfg.logger.Info("coordkit/idemhttp: fingerprint function failed; request rejected without claiming", "error", err)
		m.counter.count(OutcomeRejected)
		problem(w, http.StatusBadRequest, "request could not be fingerprinted for idempotency")
		return
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body)) // the fingerprint function may have read it
	}
	sk := ClaimKey(scope, r.Method, r.URL.EscapedPath(), key)
	fp := idempotency.FingerprintOf(digest)

	var a idempotency.Attempt
	if m.cfg.wait > 0 {
		wctx, cancel := context.WithTimeout(r.Context(), m.cfg.wait)
		a, err = m.store.Begin(wctx, sk, m.cfg.lease, fp)
		cancel()
		if err != nil && r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, idempotency.ErrUncertain) {
			a, err = idempotency.Attempt{State: idempotency.InProgress}, nil
		}
	} else {
		a, err = m.store.TryBegin(r.Context(), sk, m.cfg.lease, fp)
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the client has gone; nobody reads a reply
		}
		if errors.Is(err, idempotency.ErrForeignData) {
			// Not an outage: a retry cannot fix it, and failing open would run over someone's data.
			m.cfg.logger.Error("coordkit/idemhttp: the claim key holds data the idempotency store did not write", "error", err)
			m.counter.count(OutcomeError)
			problem(w, http.StatusInternalServerError, "idempotency record unreadable")
			return
		}
		m.cfg.logger.Warn("coordkit/idemhttp: store unavailable", "error", err, "fail_open", m.cfg.failOpen)
		if m.cfg.failOpen {
			m.counter.count(OutcomeFailedOpen)
			next.ServeHTTP(w, r)
			return
		}
		m.counter.count(OutcomeUnavailable)
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "idempotency store unavailable")
		return
	}
	switch a.State {
	case idempotency.FingerprintMismatch:
		m.counter.count(OutcomeMismatch)
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key was used for a different request")
	case idempotency.InProgress:
		m.counter.count(OutcomeInProgress)
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusConflict, "a request with this Idempotency-Key is in progress")
	case idempotency.Completed:
		rec, err := decodeRecord(a.Result)
		if err != nil {
			m.cfg.logger.Error("coordkit/idemhttp: stored response is malformed", "error", err)
			m.counter.count(OutcomeError)
			problem(w, http.StatusInternalServerError, "stored response is unreadable")
			return
		}
		h := w.Header()
		for k, vs := range rec.header {
			h[k] = vs
		}
		m.counter.count(OutcomeReplayed)
		h.Set(HeaderReplayed, "true")
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	case idempotency.Started:
		m.counter.count(OutcomeStarted)
		m.run(w, r, next, sk, a)
	default:
		m.counter.count(OutcomeError)
		problem(w, http.StatusInternalServerError, "unexpected idempotency state")
	}
}

// run executes next as the claim's owner, keeping the claim alive meanwhile, then stores its response
// or abandons the claim.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, sk string, a idempotency.Attempt) {
	rec := &recorder{w: w, max: m.cfg.maxResponse, allow: m.cfg.replayHeaders, status: http.StatusOK}
	// Renew while next runs, even after the client has gone (next may go on with its side effect);
	// next's context ends with the request or when the claim is lost.
	claim, err := m.store.Claim(sk, a)
	if err == nil {
		err = claim.KeepAlive(context.WithoutCancel(r.Context()))
	}
	if err != nil { // unreachable for an attempt TryBegin returned as Started
		m.cfg.logger.Error("coordkit/idemhttp: keep-alive could not start", "error", err)
		problem(w, http.StatusInternalServerError, "idempotency claim unusable")
		return
	}
	kctx, stop := claim.Context(), claim.Stop
	hctx, hcancel := context.WithCancelCause(r.Context())
	stopLoss := context.AfterFunc(kctx, func() { hcancel(context.Cause(kctx)) })
	finish := func() (lost error) {
		stopLoss()
		if kctx.Err() != nil {
			lost = context.Cause(kctx) // lost or expired before the handler returned
		}
		stop()
		hcancel(context.Canceled)
		return lost
	}
	token := a.OwnerToken
	panicked := true
	defer func() {
		if !panicked {
			return
		}
		finish()
		p := recover()
		if p == nil {
			return // runtime.Goexit: leave the claim pending, let the goroutine exit
		}
		if m.cfg.abandonOnPanic && !rec.wrote {
			m.abandon(r, sk, token, "abandon after panic failed; the claim expires after its lease")
		}
		panic(p)
	}()
	next.ServeHTTP(rec, r.WithContext(hctx))
	panicked = false
	if lost := finish(); lost != nil {
		m.cfg.logger.Warn("coordkit/idemhttp: the claim could not be kept alive while the handler ran; a duplicate may have run", "cause", lost)
	}

	if rec.overflow {
		// Served but not stored; the claim stays pending until its lease ends (see WithMaxStoredResponse).
		m.cfg.logger.Warn("coordkit/idemhttp: response too large to store; claim left to expire", "limit", m.cfg.maxResponse)
		return
	}
	if !rec.wrote {
		rec.snapshot()
	}
	if rec.noStore || !m.cfg.storePolicy(r, rec.status, rec.w.Header()) {
		m.abandon(r, sk, token, "abandoning a response not to be stored failed; duplicates get 409 until the claim's lease ends")
		return
	}
	data := (&record{status: rec.status, header: rec.header, body: rec.body}).encode()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
	defer cancel()
	ok, err := m.store.Complete(ctx, sk, token, data, m.cfg.retention)
	switch {
	case err != nil:
		m.cfg.logger.Warn("coordkit/idemhttp: storing the response failed; duplicates get 409 until the claim's lease ends", "error", err)
	case !ok:
		m.cfg.logger.Warn("coordkit/idemhttp: the claim was lost before the response was stored; it was not stored")
	}
}

// abandon deletes this owner's claim, bounded by the store timeout, surviving the request's end.
func (m *Middleware) abandon(r *http.Request, sk, token, failure string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
	defer cancel()
	if _, err := m.store.Abandon(ctx, sk, token); err != nil {
		m.cfg.logger.Warn("coordkit/idemhttp: "+failure, "error", err)
	}
}

// recorder passes a response through while capturing its status, allow-listed headers and body.
type recorder struct {
	w        http.ResponseWriter
	max      int
	allow    map[string]bool
	wrote    bool // a final status was sent
	status   int
	header   http.Header
	body     []byte
	overflow bool
	noStore  bool // the handler called DoNotStore
}

func (rc *recorder) Header() http.Header { return rc.w.Header() }

// snapshot records the allow-listed headers as they are when the status is sent.
func (rc *recorder) snapshot() {
	rc.wrote = true
	rc.header = http.Header{}
	for k, vs := range rc.w.Header() {
		if rc.allow[http.CanonicalHeaderKey(k)] {
			rc.header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		}
	}
}

func (rc *recorder) WriteHeader(code int) {
	if rc.wrote {
		rc.w.WriteHeader(code) // net/http logs the superfluous call
		return
	}
	if code >= 100 && code < 200 {
		rc.w.WriteHeader(code) // informational: not the final response
		return
	}
	rc.status = code
	rc.snapshot()
	rc.w.WriteHeader(code)
}

func (rc *recorder) Write(p []byte) (int, error) {
	if !rc.wrote {
		rc.WriteHeader(http.StatusOK)
	}
	if !rc.overflow {
		if len(rc.body)+len(p) > rc.max {
			rc.overflow = true
			rc.body = nil
		} else {
			rc.body = append(rc.body, p...)
		}
	}
	return rc.w.Write(p)
}

// Flush sends buffered data to the client if the underlying writer supports it.
func (rc *recorder) Flush() {
	if !rc.wrote {
		rc.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rc.w).Flush()
}

// Unwrap returns the underlying ResponseWriter, for http.ResponseController.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.w }
