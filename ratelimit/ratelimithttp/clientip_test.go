package ratelimithttp

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/coordkit/coordkit/ratelimit"
)

var testTrusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}

func TestTrustedProxyIP(t *testing.T) {
	const (
		xff = XForwardedFor
		fwd = Forwarded
	)
	for _, tc := range []struct {
		name   string
		header ForwardingHeader
		bits   int
		remote string
		xff    []string // X-Forwarded-For field lines
		fwd    []string // Forwarded field lines
		want   string   // "" for an error
	}{
		// The peer.
		{"untrusted peer: headers ignored", xff, 0, "203.0.113.7:5000", []string{"1.2.3.4"}, nil, "203.0.113.7"},
		{"untrusted peer: garbage ignored", fwd, 0, "203.0.113.7:5000", nil, []string{"x=y, junk"}, "203.0.113.7"},
		{"no header: the proxy", xff, 0, "10.0.0.1:80", nil, nil, "10.0.0.1"},
		{"empty header: the proxy", fwd, 0, "10.0.0.1:80", nil, []string{" , "}, "10.0.0.1"},
		{"ipv6 peer /48", xff, 48, "[2001:db8:1:2::1]:80", nil, nil, "2001:db8:1::/48"},
		{"ipv6 /128", xff, 128, "[2001:db8::1]:80", nil, nil, "2001:db8::1/128"},
		{"mapped ipv4 peer", xff, 0, "[::ffff:203.0.113.7]:80", nil, nil, "203.0.113.7"},
		{"zone dropped", xff, 128, "[fe80::1%eth0]:80", nil, nil, "fe80::1/128"},
		{"peer without a port", xff, 0, "203.0.113.7", nil, nil, "203.0.113.7"},
		{"peer not an IP", xff, 0, "@", nil, nil, ""},

		// Spoofing: the other field is never read, a client-supplied prefix of the chosen one is ignored.
		{"xff: client Forwarded ignored", xff, 0, "10.0.0.1:80", []string{"203.0.113.7"}, []string{"for=198.51.100.99"}, "203.0.113.7"},
		{"xff: client Forwarded garbage ignored", xff, 0, "10.0.0.1:80", []string{"203.0.113.7"}, []string{"x=y"}, "203.0.113.7"},
		{"xff: no field, client Forwarded ignored", xff, 0, "10.0.0.1:80", nil, []string{"for=198.51.100.99"}, "10.0.0.1"},
		{"fwd: client XFF ignored", fwd, 0, "10.0.0.1:80", []string{"198.51.100.99"}, []string{"for=203.0.113.7"}, "203.0.113.7"},
		{"fwd: no field, client XFF ignored", fwd, 0, "10.0.0.1:80", []string{"198.51.100.99"}, nil, "10.0.0.1"},
		{"xff: forged left part ignored", xff, 0, "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.9, 10.0.0.2"}, nil, "198.51.100.9"},
		{"fwd: forged left part ignored", fwd, 0, "10.0.0.1:80", nil, []string{"for=6.6.6.6, for=198.51.100.9, for=10.0.0.2"}, "198.51.100.9"},
		{"xff: forged trusted address left of the client", xff, 0, "10.0.0.1:80", []string{"10.9.9.9, 198.51.100.9"}, nil, "198.51.100.9"},

		// Garbage left of the client is never parsed.
		{"xff: garbage left", xff, 0, "10.0.0.1:80", []string{"junk, 198.51.100.9"}, nil, "198.51.100.9"},
		{"fwd: element without for left", fwd, 0, "10.0.0.1:80", nil, []string{"x=y, for=198.51.100.9"}, "198.51.100.9"},
		{"fwd: proto-only element left", fwd, 0, "10.0.0.1:80", nil, []string{"proto=https", "for=198.51.100.9"}, "198.51.100.9"},
		{"fwd: unterminated quote left", fwd, 0, "10.0.0.1:80", nil, []string{`for="6.6.6.6, for=198.51.100.9;proto=http`}, "198.51.100.9"},
		{"fwd: unterminated quote on an earlier line", fwd, 0, "10.0.0.1:80", nil, []string{`for="6.6.6.6`, `for=198.51.100.9`}, "198.51.100.9"},
		{"fwd: unknown left", fwd, 0, "10.0.0.1:80", nil, []string{`for=unknown, for="_hidden", for=198.51.100.9`}, "198.51.100.9"},

		// Garbage among trusted hops is an error.
		{"xff: garbage hop", xff, 0, "10.0.0.1:80", []string{"not-an-ip"}, nil, ""},
		{"xff: garbage right of the client", xff, 0, "10.0.0.1:80", []string{"198.51.100.9, junk"}, nil, ""},
		{"xff: garbage after a trusted hop", xff, 0, "10.0.0.1:80", []string{"198.51.100.9, junk, 10.0.0.2"}, nil, ""},
		{"fwd: unknown", fwd, 0, "10.0.0.1:80", nil, []string{"for=unknown"}, ""},
		{"fwd: obfuscated", fwd, 0, "10.0.0.1:80", nil, []string{`for="_hidden"`}, ""},
		{"fwd: element without for", fwd, 0, "10.0.0.1:80", nil, []string{"for=198.51.100.9, proto=https"}, ""},
		{"fwd: for twice", fwd, 0, "10.0.0.1:80", nil, []string{"for=198.51.100.9;FOR=198.51.100.8"}, ""},
		{"fwd: unterminated quote", fwd, 0, "10.0.0.1:80", nil, []string{`for="198.51.100.9`}, ""},
		{"fwd: space in token", fwd, 0, "10.0.0.1:80", nil, []string{`for=198.51.100.9 x`}, ""},
		{"fwd: bad port", fwd, 0, "10.0.0.1:80", nil, []string{`for="198.51.100.9:99999"`}, ""},
		{"fwd: bracketed ipv4", fwd, 0, "10.0.0.1:80", nil, []string{`for="[198.51.100.9]"`}, ""},

		// Chains.
		{"xff: one hop", xff, 0, "10.0.0.1:80", []string{"198.51.100.9"}, nil, "198.51.100.9"},
		{"xff: several field lines", xff, 0, "10.0.0.1:80", []string{"6.6.6.6", "198.51.100.9"}, nil, "198.51.100.9"},
		{"xff: several field lines, trusted last", xff, 0, "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.9", "10.0.0.3,10.0.0.2"}, nil, "198.51.100.9"},
		{"xff: whitespace and empty elements", xff, 0, "10.0.0.1:80", []string{" \t198.51.100.9 ,, \t10.0.0.2 , "}, nil, "198.51.100.9"},
		{"xff: all trusted: leftmost", xff, 0, "10.0.0.1:80", []string{"10.1.1.1, 10.0.0.2"}, nil, "10.1.1.1"},
		{"xff: ipv4 with port", xff, 0, "10.0.0.1:80", []string{"198.51.100.9:1234"}, nil, "198.51.100.9"},
		{"xff: bracketed ipv6 with port", xff, 0, "10.0.0.1:80", []string{"[2001:db8:1:2::9]:1234"}, nil, "2001:db8:1:2::/64"},
		{"xff: bracketed ipv6", xff, 0, "10.0.0.1:80", []string{"[2001:db8:1:2::9]"}, nil, "2001:db8:1:2::/64"},
		{"xff: ipv6 default /64", xff, 0, "[fd00::1]:80", []string{"2001:db8:1:2:aaaa::1"}, nil, "2001:db8:1:2::/64"},
		{"xff: ipv6 /56", xff, 56, "[fd00::1]:80", []string{"2001:db8:1:2ff:aaaa::1, fd00::7"}, nil, "2001:db8:1:200::/56"},
		{"xff: mapped ipv4 hop", xff, 0, "10.0.0.1:80", []string{"::ffff:198.51.100.9"}, nil, "198.51.100.9"},
		{"xff: mapped trusted hop", xff, 0, "10.0.0.1:80", []string{"198.51.100.9, ::ffff:10.0.0.2"}, nil, "198.51.100.9"},
		{"fwd: one hop", fwd, 0, "10.0.0.1:80", nil, []string{"for=198.51.100.9"}, "198.51.100.9"},
		{"fwd: parameters", fwd, 0, "10.0.0.1:80", nil, []string{"by=10.0.0.1;For=198.51.100.9;proto=https;host=example.com"}, "198.51.100.9"},
		{"fwd: quoted ipv6 with port", fwd, 0, "10.0.0.1:80", nil, []string{`for=6.6.6.6, for="[2001:db8::5]:4711";proto=https`}, "2001:db8::/64"},
		{"fwd: quoted ipv6", fwd, 0, "10.0.0.1:80", nil, []string{`for="[2001:db8:1:2::5]"`}, "2001:db8:1:2::/64"},
		{"fwd: unquoted ipv6 with port", fwd, 0, "10.0.0.1:80", nil, []string{`for=[2001:db8:1:2::5]:4711`}, "2001:db8:1:2::/64"},
		{"fwd: unbracketed ipv6", fwd, 0, "10.0.0.1:80", nil, []string{`for="2001:db8:1:2::5"`}, "2001:db8:1:2::/64"},
		{"fwd: quoted ipv4 with port", fwd, 0, "10.0.0.1:80", nil, []string{`for="198.51.100.9:1234"`}, "198.51.100.9"},
		{"fwd: unquoted ipv4 with port", fwd, 0, "10.0.0.1:80", nil, []string{`for=198.51.100.9:1234`}, "198.51.100.9"},
		{"fwd: obfuscated port", fwd, 0, "10.0.0.1:80", nil, []string{`for="198.51.100.9:_abc"`}, "198.51.100.9"},
		{"fwd: comma and semicolon in quotes", fwd, 0, "10.0.0.1:80", nil, []string{`for=198.51.100.9;host="a,b;c", for=10.0.0.2;x="p, q"`}, "198.51.100.9"},
		{"fwd: escaped quote", fwd, 0, "10.0.0.1:80", nil, []string{`for=6.6.6.6, for=198.51.100.9;x="a\", for=10.0.0.2"`}, "198.51.100.9"},
		{"fwd: escaped backslash before the closing quote", fwd, 0, "10.0.0.1:80", nil, []string{`for=6.6.6.6, for=198.51.100.9;x="a\\", for=10.0.0.3`}, "198.51.100.9"},
		{"fwd: escapes in the node", fwd, 0, "10.0.0.1:80", nil, []string{`for="198.51.100.\9"`}, "198.51.100.9"},
		{"fwd: several field lines", fwd, 0, "10.0.0.1:80", nil, []string{"for=6.6.6.6", "for=198.51.100.9", "for=10.0.0.2"}, "198.51.100.9"},
		{"fwd: whitespace, empty elements and pairs", fwd, 0, "10.0.0.1:80", nil, []string{" for=198.51.100.9 ; proto=https; ,, \tfor=10.0.0.2;; "}, "198.51.100.9"},
		{"fwd: all trusted: leftmost", fwd, 0, "10.0.0.1:80", nil, []string{`for=10.1.1.1, for="[fd00::2]"`}, "10.1.1.1"},
		{"fwd: ipv6 default /64", fwd, 0, "[fd00::1]:80", nil, []string{`for="[2001:db8:1:2:aaaa::1]"`}, "2001:db8:1:2::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := TrustedProxyIP(testTrusted, tc.header, tc.bits)
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
			if tc.want == "" {
				if err == nil {
					t.Fatalf("= %q, want an error", got)
				}
				if !strings.HasPrefix(err.Error(), "ratelimithttp: ") {
					t.Fatalf("error %q lacks the package prefix", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTrustedProxyIPMappedTrustedPrefix(t *testing.T) {
	fn, err := TrustedProxyIP([]netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, XForwardedFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.9")
	if got, err := fn(r); err != nil || got != "198.51.100.9" {
		t.Fatalf("= %q, %v; want the forwarded client (the mapped prefix trusts 10.0.0.0/8)", got, err)
	}
}

func TestTrustedProxyIPConfig(t *testing.T) {
	for name, call := range map[string]func() error{
		"zero header":    func() error { _, err := TrustedProxyIP(testTrusted, 0, 0); return err },
		"unknown header": func() error { _, err := TrustedProxyIP(testTrusted, Forwarded+1, 0); return err },
		"prefix -1":      func() error { _, err := TrustedProxyIP(testTrusted, XForwardedFor, -1); return err },
		"prefix 129":     func() error { _, err := TrustedProxyIP(testTrusted, Forwarded, 129); return err },
		"invalid trusted": func() error {
			_, err := TrustedProxyIP([]netip.Prefix{testTrusted[0], {}}, XForwardedFor, 0)
			return err
		},
	} {
		err := call()
		if !errors.Is(err, ratelimit.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "ratelimithttp: ") {
			t.Errorf("%s: %v, want a ratelimithttp: error matching ratelimit.ErrInvalidConfig", name, err)
		}
	}
	for _, bits := range []int{0, 1, 64, 128} {
		if _, err := TrustedProxyIP(nil, XForwardedFor, bits); err != nil {
			t.Errorf("/%d: %v", bits, err)
		}
	}
	if XForwardedFor.String() != "X-Forwarded-For" || Forwarded.String() != "Forwarded" || ForwardingHeader(0).String() != "ForwardingHeader(0)" {
		t.Error("ForwardingHeader.String")
	}
}

// TestTrustedProxyIPCopiesTrusted: changing the caller's slice later changes nothing.
func TestTrustedProxyIPCopiesTrusted(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	fn, err := TrustedProxyIP(trusted, XForwardedFor, 0)
	if err != nil {
		t.Fatal(err)
	}
	trusted[0] = netip.MustParsePrefix("192.0.2.0/24")
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:80"
	r.Header.Set("X-Forwarded-For", "198.51.100.9")
	if got, err := fn(r); err != nil || got != "198.51.100.9" {
		t.Fatalf("= %q, %v", got, err)
	}
}

// FuzzTrustedProxyIP: any peer and header lines yield a non-empty key or an error, never a panic;
// and when the key names an untrusted client, text a client puts in front of the chain (a prefix
// ending in a comma on the first line, or a whole line before it) changes nothing.
func FuzzTrustedProxyIP(f *testing.F) {
	f.Add("10.0.0.1:80", false, "1.2.3.4, 10.0.0.2", "", "junk")
	f.Add("[fd00::1]:80", true, `for="[2001:db8::1]:1";by=x`, "for=10.0.0.3", `"`)
	f.Add("10.0.0.1:80", true, `for=198.51.100.9;x="a\\"`, "", `for="`)
	f.Add("10.0.0.1:80", true, `for=1.2.3.4;x="a,b", for=10.0.0.2`, "for=10.0.0.5", `\`)
	f.Add("10.0.0.1:80", false, "", "[2001:db8::1]:80, 10.0.0.2", "x=y")
	keyFns := map[bool]func(*http.Request) (string, error){}
	for _, fwd := range []bool{false, true} {
		h := XForwardedFor
		if fwd {
			h = Forwarded
		}
		fn, err := TrustedProxyIP(testTrusted, h, 0)
		if err != nil {
			f.Fatal(err)
		}
		keyFns[fwd] = fn
	}
	isTrusted := func(key string) bool {
		if p, err := netip.ParsePrefix(key); err == nil {
			return testTrusted[1].Contains(p.Addr())
		}
		a, err := netip.ParseAddr(key)
		if err != nil {
			return false
		}
		return testTrusted[0].Contains(a)
	}
	f.Fuzz(func(t *testing.T, remote string, fwd bool, line1, line2, junk string) {
		name := "X-Forwarded-For"
		if fwd {
			name = "Forwarded"
		}
		run := func(lines ...string) (string, error) {
			r, _ := http.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = remote
			for _, l := range lines {
				r.Header.Add(name, l)
			}
			return keyFns[fwd](r)
		}
		key, err := run(line1, line2)
		if err != nil {
			return
		}
		if key == "" {
			t.Fatalf("empty key for %q %q %q", remote, line1, line2)
		}
		if isTrusted(key) {
			return // every hop trusted: the leftmost one, which a prefix may change
		}
		for _, lines := range [][]string{{junk + "," + line1, line2}, {junk, line1, line2}} {
			if got, err := run(lines...); err != nil || got != key {
				t.Fatalf("%q: = %q, %v; want %q as without the prefix %q", lines, got, err, key, junk)
			}
		}
	})
}
