package ratelimithttp

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestTrustedProxyIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name   string
		bits   int
		remote string
		xff    []string
		fwd    []string
		want   string
		err    bool
	}{
		{"untrusted peer: headers ignored", 0, "203.0.113.7:5000", []string{"1.2.3.4"}, nil, "203.0.113.7", false},
		{"trusted peer, one hop", 0, "10.0.0.1:80", []string{"198.51.100.9"}, nil, "198.51.100.9", false},
		{"forged left part ignored", 0, "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.9, 10.0.0.2"}, nil, "198.51.100.9", false},
		{"several field lines", 0, "10.0.0.1:80", []string{"6.6.6.6", "198.51.100.9"}, nil, "198.51.100.9", false},
		{"all trusted: leftmost", 0, "10.0.0.1:80", []string{"10.1.1.1, 10.0.0.2"}, nil, "10.1.1.1", false},
		{"no header: the proxy", 0, "10.0.0.1:80", nil, nil, "10.0.0.1", false},
		{"ipv6 default /64", 0, "[fd00::1]:80", []string{"2001:db8:1:2:aaaa::1"}, nil, "2001:db8:1:2::/64", false},
		{"ipv6 peer /48", 48, "[2001:db8:1:2::1]:80", nil, nil, "2001:db8:1::/48", false},
		{"ipv6 /128", 128, "[2001:db8::1]:80", nil, nil, "2001:db8::1/128", false},
		{"mapped ipv4", 0, "[::ffff:203.0.113.7]:80", nil, nil, "203.0.113.7", false},
		{"forwarded wins", 0, "10.0.0.1:80", []string{"9.9.9.9"}, []string{`for=6.6.6.6, for="[2001:db8::5]:4711";proto=https`}, "2001:db8::/64", false},
		{"forwarded ipv4 with port", 0, "10.0.0.1:80", nil, []string{`for="198.51.100.9:1234"`}, "198.51.100.9", false},
		{"garbage hop", 0, "10.0.0.1:80", []string{"not-an-ip"}, nil, "", true},
		{"forwarded unknown", 0, "10.0.0.1:80", nil, []string{"for=unknown"}, "", true},
		{"garbage left of the client is never read", 0, "10.0.0.1:80", []string{"junk, 198.51.100.9"}, nil, "198.51.100.9", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := TrustedProxyIP(trusted, tc.bits)
			if err != nil {
				t.Fatal(err)
			}
			r, _ := http.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				r.Header.Add("Forwarded", v)
			}
			got, err := fn(r)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("= %q, %v; want %q (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
	for _, bits := range []int{-1, 129} {
		if _, err := TrustedProxyIP(nil, bits); err == nil {
			t.Fatalf("prefix /%d accepted", bits)
		}
	}
	if _, err := TrustedProxyIP([]netip.Prefix{{}}, 0); err == nil {
		t.Fatal("invalid trusted prefix accepted")
	}
}

// FuzzTrustedProxyIP: any header and peer either yield a non-empty key or an error, never a panic.
func FuzzTrustedProxyIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 10.0.0.2", "")
	f.Add("[fd00::1]:80", "", `for="[2001:db8::1]:1";by=x`)
	fn, err := TrustedProxyIP([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		if fwd != "" {
			r.Header.Set("Forwarded", fwd)
		}
		key, err := fn(r)
		if err == nil && key == "" {
			t.Fatalf("empty key for %q %q %q", remote, xff, fwd)
		}
	})
}
