package ratelimithttp_test

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/coordkit/coordkit/ratelimit/ratelimithttp"
)

// Keying by client IP behind your own load balancers (10.0.0.0/8), which append to
// X-Forwarded-For: the rightmost untrusted hop is the client (a Forwarded field, which they do not
// write, is ignored); IPv6 clients share one /64. Pass key to ratelimithttp.WithKey, with
// ratelimithttp.WithLegacyHeaders(true) for old clients.
func ExampleTrustedProxyIP() {
	key, err := ratelimithttp.TrustedProxyIP([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		ratelimithttp.XForwardedFor, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.7:443"
	r.Header.Set("X-Forwarded-For", "203.0.113.9, 2001:db8:1:2::77")
	r.Header.Set("Forwarded", "for=198.51.100.1") // passed through from the client: never read
	fmt.Println(key(r))
	// Output: 2001:db8:1:2::/64 <nil>
}
