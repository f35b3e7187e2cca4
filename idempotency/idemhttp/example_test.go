package idemhttp_test

import (
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
		idemhttp.WithTTL(24*time.Hour),
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
