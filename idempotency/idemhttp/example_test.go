package idemhttp_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/idemhttp"
)

// This example protects a payments endpoint. It needs a server, so it is compiled but not run.
func ExampleMiddleware_Handler() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client, idempotency.WithKeyPrefix("myapp:"))
	mw, err := idemhttp.New(st,
		idemhttp.WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
		idemhttp.WithScope(func(r *http.Request) (string, error) {
			tenant := r.Header.Get("X-Tenant") // set by the authentication middleware outside this one
			if tenant == "" {
				return "", errors.New("no tenant: authentication middleware missing")
			}
			return tenant, nil
		}),
		idemhttp.WithClaimLease(30*time.Second), // kept alive while the handler runs
		idemhttp.WithRetention(24*time.Hour),    // how long a response is replayed
		idemhttp.WithMaxStoredResponse(64<<10),
	)
	if err != nil {
		return
	}
	payments := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"payment":"p_1"}`)
	})
	http.Handle("/payments", mw.Handler(payments))
}

func ExampleParseKey() {
	k, err := idemhttp.ParseKey(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	fmt.Println(k, err)
	// Output: 8e03978e-40d5-43e8-bc93-6894a57f9324 <nil>
}

// An operator names the claim of a request (tenant t-42 sent POST /payments with key k-1), to read it
// with the middleware's Store: st.Inspect(ctx, key) reports its state without changing it.
func ExampleClaimKey() {
	key := idemhttp.ClaimKey("t-42", http.MethodPost, "/payments", "k-1")
	fmt.Println(key[:len("idemhttp:")], len(key))
	// Output: idemhttp: 73
}

func ExampleDefaultStorePolicy() {
	for _, status := range []int{200, 422, 429, 500, 503} {
		fmt.Println(status, idemhttp.DefaultStorePolicy(nil, status, nil))
	}
	// Output:
	// 200 true
	// 422 true
	// 429 false
	// 500 true
	// 503 false
}

// The fingerprint is canonical JSON of the fields that matter, so a retry whose JSON has its fields
// in another order (or extra whitespace) is the same request. It needs a server, so it is compiled but
// not run.
func ExampleWithFingerprint() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client)
	mw, err := idemhttp.New(st, idemhttp.WithSharedScope(true), idemhttp.WithFingerprint(func(r *http.Request, body []byte) (string, error) {
		var p struct {
			Amount   int64  `json:"amount"`
			Currency string `json:"currency"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return "", err // answered 400, nothing claimed
		}
		canonical, _ := json.Marshal(p) // fields in struct order
		sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.EscapedPath()+"\n"), canonical...))
		return hex.EncodeToString(sum[:]), nil
	}))
	if err != nil {
		return
	}
	http.Handle("/payments", mw.Handler(http.NotFoundHandler()))
}

// Store only successful responses, and let a handler refuse storage for a response of its own. It
// needs a server, so it is compiled but not run.
func ExampleWithStorePolicy() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		return
	}
	defer client.Close()
	st, _ := idempotency.New(client)
	mw, err := idemhttp.New(st, idemhttp.WithSharedScope(true), idemhttp.WithStorePolicy(func(_ *http.Request, status int, _ http.Header) bool {
		return status < 500 && idemhttp.DefaultStorePolicy(nil, status, nil)
	}))
	if err != nil {
		return
	}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			idemhttp.DoNotStore(w) // nothing happened: let the client fix the request and retry
			http.Error(w, "want JSON", http.StatusUnsupportedMediaType)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	http.Handle("/orders", mw.Handler(orders))
}
