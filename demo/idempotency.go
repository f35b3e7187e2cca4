package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
)

// The idempotency step's shape: 200 concurrent requests, 10 duplicates for each of 20 keys, against a
// payments endpoint whose work takes a while, so most duplicates arrive while the original runs.
const (
	idemKeys       = 20
	idemPerKey     = 10
	idemWork       = 50 * time.Millisecond
	idemWait       = 2 * time.Second // how long a duplicate waits in the middleware for the original
	idemMaxRetries = 50              // client retries of a 409 (should the wait end first)
)

// idempotencyStep: an httptest server runs a payments handler behind idemhttp (Redis-backed claims,
// duplicates wait for the original, woken by invalidation). 200 concurrent requests carry 20
// idempotency keys; clients retry a 409 after its Retry-After (scaled down). Exactly 20 executions
// and 180 replays (counted by the Idempotent-Replayed header) must result, every replay must equal
// its original, and the middleware's rejections (422 reused key, 400 missing key) are shown.
func idempotencyStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	client, tracker, err := e.trackedClient()
	if err != nil {
		return res, fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	store, err := idempotency.New(client, idempotency.WithTracker(tracker), idempotency.WithKeyPrefix(e.prefix+"idem:"))
	if err != nil {
		return res, err
	}
	mw, err := idemhttp.New(store,
		idemhttp.WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
		idemhttp.WithScope(func(r *http.Request) (string, error) {
			tenant := r.Header.Get("X-Tenant") // authentication would set it; every request here does
			if tenant == "" {
				return "", errors.New("request has no tenant")
			}
			return tenant, nil
		}),
		idemhttp.WithRetention(time.Minute),
		idemhttp.WithWait(idemWait),
		idemhttp.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	if err != nil {
		return res, err
	}

	var (
		executions atomic.Int32
		perKey     [idemKeys]atomic.Int32
		payments   atomic.Int64
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executions.Add(1)
		var k int
		fmt.Sscanf(r.Header.Get(idemhttp.HeaderKey), "pay-%d", &k)
		if k >= 0 && k < idemKeys {
			perKey[k].Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		time.Sleep(idemWork) // the payment provider
		id := payments.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d,"request":%q}`, id, body)
	})
	srv := httptest.NewServer(mw.Handler(handler))
	defer srv.Close()
	transport := &http.Transport{MaxIdleConnsPerHost: idemKeys * idemPerKey}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	type outcome struct {
		key      int
		status   int
		replayed bool
		body     string
		conflict int // 409s before the final answer
		err      error
	}
	post := func(key, body string, header ...string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		if err != nil {
			return nil, "", err
		}
		if key != "" {
			req.Header.Set(idemhttp.HeaderKey, key)
		}
		req.Header.Set("X-Tenant", "acme")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}

	outcomes := make([]outcome, idemKeys*idemPerKey)
	start := make(chan struct{})
	began := time.Now()
	var wg sync.WaitGroup
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := outcome{key: i % idemKeys}
			key := fmt.Sprintf("pay-%d", o.key)
			body := fmt.Sprintf(`{"amount":%d}`, 100+o.key)
			<-start
			for {
				resp, b, err := post(key, body)
				if err != nil {
					o.err = err
					break
				}
				if resp.StatusCode == http.StatusConflict && o.conflict < idemMaxRetries {
					o.conflict++
					time.Sleep(20 * time.Millisecond) // Retry-After says 1s; scaled down for the demo
					continue
				}
				o.status, o.body = resp.StatusCode, b
				o.replayed = resp.Header.Get(idemhttp.HeaderReplayed) == "true"
				break
			}
			outcomes[i] = o
		}()
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	var (
		replays, originals, conflicts, failures int
		bodies                                  [idemKeys]map[string]bool
		errs                                    []error
	)
	for i := range bodies {
		bodies[i] = map[string]bool{}
	}
	for _, o := range outcomes {
		conflicts += o.conflict
		switch {
		case o.err != nil:
			errs = append(errs, o.err)
			failures++
		case o.status != http.StatusCreated:
			failures++
		case o.replayed:
			replays++
		default:
			originals++
		}
		if o.err == nil {
			bodies[o.key][o.body] = true
		}
	}
	distinct := true
	for _, b := range bodies {
		if len(b) != 1 {
			distinct = false
		}
	}
	onceEach := true
	for i := range perKey {
		if perKey[i].Load() != 1 {
			onceEach = false
		}
	}

	// The rest of the behaviour table, on one key of the run.
	reused, _, rerr := post("pay-0", `{"amount":999}`)
	missing, _, merr := post("", `{"amount":1}`)
	status := func(r *http.Response, err error) int {
		if err != nil || r == nil {
			return 0
		}
		return r.StatusCode
	}

	res.add("requests", "%d concurrent (%d keys x %d duplicates)", len(outcomes), idemKeys, idemPerKey)
	res.add("handler executions", "%d", executions.Load())
	res.add("first responses", "%d (201 Created)", originals)
	res.add("replays", "%d (201 + Idempotent-Replayed: true)", replays)
	res.add("409s retried", "%d (duplicates that outlived the %v wait)", conflicts, idemWait)
	if len(errs) > 0 {
		res.add("failed requests", "%d (%v)", failures, errors.Join(errs...))
	} else {
		res.add("failed requests", "%d", failures)
	}
	res.add("reused key, other body", "%d", status(reused, rerr))
	res.add("missing required key", "%d", status(missing, merr))
	res.add("burst time", "%v", elapsed.Round(time.Millisecond))

	res.check("exactly 20 handler executions", executions.Load() == idemKeys, "%d", executions.Load())
	res.check("each key executed once", onceEach, "")
	res.check("exactly 180 replays", replays == idemKeys*(idemPerKey-1) && originals == idemKeys && failures == 0,
		"%d replays, %d originals, %d failures", replays, originals, failures)
	res.check("replays equal their original", distinct, "")
	res.check("reused key with another body is 422", status(reused, rerr) == http.StatusUnprocessableEntity, "%d", status(reused, rerr))
	res.check("missing required key is 400", status(missing, merr) == http.StatusBadRequest, "%d", status(missing, merr))
	res.summary = fmt.Sprintf("%d executions, %d replays of %d requests", executions.Load(), replays, len(outcomes))
	return res, nil
}
