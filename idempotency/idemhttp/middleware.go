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
	store *idempotency.Store
	cfg   config
}

// New returns a Middleware storing claims and responses in store. It does no I/O. It fails for a nil
// store or an invalid option, with an error matching luakit.ErrInvalidConfig.
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
	return &Middleware{store: store, cfg: cfg}, nil
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

// storeKey is the claim key of one request: a digest of scope, method, path and the client's key.
func storeKey(scope, method, path, key string) string {
	h := sha256.New()
	lp(h, scope)
	lp(h, method)
	lp(h, path)
	lp(h, key)
	return "idemhttp:" + hex.EncodeToString(h.Sum(nil))
}

// fingerprint is the digest of what makes two requests "the same": method, path, query and body.
func fingerprint(method, path, query string, body []byte) idempotency.Fingerprint {
	h := sha256.New()
	lp(h, method)
	lp(h, path)
	lp(h, query)
	h.Write(body)
	return idempotency.FingerprintOf(hex.EncodeToString(h.Sum(nil)))
}

// problem writes an RFC 9457 problem response.
func problem(w http.ResponseWriter, status int, title string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"title":%s,"status":%d}`, strconv.Quote(title), status)
}

// Handler wraps next. For each request:
//
//   - no Idempotency-Key header: 400 if the key is required for the request (see [WithRequired]),
//     otherwise next runs unprotected;
//   - a malformed or repeated header: 400;
//   - a body longer than the request limit: 413;
//   - the key is free: next runs; its status, allow-listed headers and body (if within the stored
//     response limit) are stored and replayed to duplicates for the TTL;
//   - the same key with the same method, path, query and body, completed: the stored response with
//     Idempotent-Replayed: true;
//   - the same key while the original is in flight: 409 with Retry-After (after waiting, see [WithWait]);
//   - the same key with a different request: 422;
//   - the scope function ([WithScope]) fails: 500, the key is not claimed;
//   - the claim key holds data the store did not write, or a stored response that does not decode:
//     500 (a retry cannot fix it; [WithFailOpen] does not apply);
//   - the store fails: 503 with Retry-After: 1 (or next runs unprotected with [WithFailOpen]).
//
// Keys are scoped by the caller ([WithScope]), the method and the path. Error responses are
// application/problem+json. Every response of next is stored, 5xx included (a retry gets the same
// answer); a response too large to store leaves its claim pending until the TTL ends. A panic in next
// leaves the claim pending (or abandons it, see [WithAbandonOnPanic]) and is re-raised.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	values := r.Header.Values(HeaderKey)
	if len(values) == 0 {
		if m.cfg.required(r) {
			problem(w, http.StatusBadRequest, "Idempotency-Key header is required")
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	if len(values) > 1 {
		problem(w, http.StatusBadRequest, "Idempotency-Key header must appear once")
		return
	}
	key, err := ParseKey(values[0])
	if err != nil {
		problem(w, http.StatusBadRequest, "Idempotency-Key header is malformed")
		return
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(io.LimitReader(r.Body, m.cfg.maxRequest+1))
		r.Body.Close()
		if err != nil {
			problem(w, http.StatusBadRequest, "request body could not be read")
			return
		}
		if int64(len(body)) > m.cfg.maxRequest {
			problem(w, http.StatusRequestEntityTooLarge, "request body too large for an idempotent request")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	scope, err := m.cfg.scope(r)
	if err != nil {
		m.cfg.logger.Error("idemhttp: scope function failed; request rejected without claiming", "error", err)
		problem(w, http.StatusInternalServerError, "request could not be scoped for idempotency")
		return
	}
	path := r.URL.EscapedPath()
	sk := storeKey(scope, r.Method, path, key)
	fp := fingerprint(r.Method, path, r.URL.RawQuery, body)

	var a idempotency.Attempt
	if m.cfg.wait > 0 {
		wctx, cancel := context.WithTimeout(r.Context(), m.cfg.wait)
		a, err = m.store.Begin(wctx, sk, m.cfg.ttl, fp)
		cancel()
		if err != nil && r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, idempotency.ErrUncertain) {
			a, err = idempotency.Attempt{State: idempotency.InProgress}, nil
		}
	} else {
		a, err = m.store.TryBegin(r.Context(), sk, m.cfg.ttl, fp)
	}
	if err != nil {
		if r.Context().Err() != nil {
			return // the client has gone; nobody reads a reply
		}
		if errors.Is(err, idempotency.ErrForeignData) {
			// Not an outage: a retry cannot fix it, and failing open would run over someone's data.
			m.cfg.logger.Error("idemhttp: the claim key holds data the idempotency store did not write", "error", err)
			problem(w, http.StatusInternalServerError, "idempotency record unreadable")
			return
		}
		m.cfg.logger.Warn("idemhttp: store unavailable", "error", err, "fail_open", m.cfg.failOpen)
		if m.cfg.failOpen {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusServiceUnavailable, "idempotency store unavailable")
		return
	}
	switch a.State {
	case idempotency.FingerprintMismatch:
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key was used for a different request")
	case idempotency.InProgress:
		w.Header().Set("Retry-After", "1")
		problem(w, http.StatusConflict, "a request with this Idempotency-Key is in progress")
	case idempotency.Completed:
		rec, err := decodeRecord(a.Result)
		if err != nil {
			m.cfg.logger.Error("idemhttp: stored response is malformed", "error", err)
			problem(w, http.StatusInternalServerError, "stored response is unreadable")
			return
		}
		h := w.Header()
		for k, vs := range rec.header {
			h[k] = vs
		}
		h.Set(HeaderReplayed, "true")
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	case idempotency.Started:
		m.run(w, r, next, sk, a.OwnerToken)
	default:
		problem(w, http.StatusInternalServerError, "unexpected idempotency state")
	}
}

// run executes next as the claim's owner and stores its response.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, sk, token string) {
	rec := &recorder{w: w, max: m.cfg.maxResponse, allow: m.cfg.replayHeaders, status: http.StatusOK}
	panicked := true
	defer func() {
		if !panicked {
			return
		}
		p := recover()
		if p == nil {
			return // runtime.Goexit: leave the claim pending, let the goroutine exit
		}
		if m.cfg.abandonOnPanic && !rec.wrote {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
			if _, err := m.store.Abandon(ctx, sk, token); err != nil {
				m.cfg.logger.Warn("idemhttp: abandon after panic failed; the claim expires after its TTL", "error", err)
			}
			cancel()
		}
		panic(p)
	}()
	next.ServeHTTP(rec, r)
	panicked = false

	if rec.overflow {
		// Served but not stored; the claim stays pending until the TTL ends (see WithMaxStoredResponse).
		m.cfg.logger.Warn("idemhttp: response too large to store; claim left to expire", "limit", m.cfg.maxResponse)
		return
	}
	if !rec.wrote {
		rec.snapshot()
	}
	data := (&record{status: rec.status, header: rec.header, body: rec.body}).encode()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.cfg.storeTimeout)
	defer cancel()
	ok, err := m.store.Complete(ctx, sk, token, data)
	switch {
	case err != nil:
		m.cfg.logger.Warn("idemhttp: storing the response failed; duplicates get 409 until the claim expires", "error", err)
	case !ok:
		m.cfg.logger.Warn("idemhttp: the claim expired before the response was stored; raise the TTL")
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
