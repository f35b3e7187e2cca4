package ratelimithttp

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/coordkit/coordkit/luakit"
)

// DefaultIPv6Prefix is the prefix length [TrustedProxyIP] keys IPv6 clients by unless told
// otherwise: one /64, the smallest network a site is usually assigned, so that a client cannot
// multiply its quota by rotating addresses within its own network.
const DefaultIPv6Prefix = 64

// ForwardingHeader names the request header field from which [TrustedProxyIP] reads the forwarding
// chain: the one field your proxies append to. The zero value names no field and is rejected.
type ForwardingHeader int

const (
	// XForwardedFor is the X-Forwarded-For field: comma-separated addresses, each proxy appending
	// the address of its peer (nginx's $proxy_add_x_forwarded_for, AWS ALB, HAProxy's forwardfor,
	// most CDNs). An element is an IP address with optional whitespace around it; an IPv4 address
	// with a port ("192.0.2.1:443") and a bracketed IPv6 address with or without a port
	// ("[2001:db8::1]:443") are accepted too.
	XForwardedFor ForwardingHeader = iota + 1
	// Forwarded is the Forwarded field of RFC 7239: comma-separated elements whose "for" parameter
	// is the address of the proxy's peer (Envoy and HAProxy can be configured to write it). Elements
	// are parsed as RFC 7239 says: semicolon-separated parameters with case-insensitive names,
	// values as tokens or quoted strings (with backslash escapes; commas and semicolons inside
	// quotes belong to the value), a parameter at most once per element, and the "for" node an IPv4
	// address or a bracketed IPv6 address, each optionally with a port (digits, or an obfuscated
	// "_x" port). Leniently, a node needing quotes is accepted unquoted (for=[2001:db8::1]:80,
	// for=192.0.2.1:80), an IPv6 node without brackets, and whitespace around semicolons. Quotes
	// never span field lines.
	Forwarded
)

// String returns the field name ("X-Forwarded-For" or "Forwarded"), or a description of an invalid
// value.
func (h ForwardingHeader) String() string {
	switch h {
	case XForwardedFor:
		return "X-Forwarded-For"
	case Forwarded:
		return "Forwarded"
	}
	return fmt.Sprintf("ForwardingHeader(%d)", int(h))
}

// TrustedProxyIP returns a key function for [WithKey] naming the client IP of a request that may
// have passed through reverse proxies you run. trusted lists those proxies' networks (CIDRs);
// header names the one field they append the address of their peer to; the other forwarding field
// (and X-Real-IP) is never read. When the TCP peer (r.RemoteAddr) is not in trusted it is the client;
// otherwise the chain in header is walked from the right to the first address not in trusted. The
// walk, and the elements that make the key function fail (the middleware then answers 500 and logs
// it), are in the package documentation, "Client IP behind proxies".
//
// The key is the IPv4 address, or the IPv6 address masked to ipv6Prefix bits in CIDR form (e.g.
// "2001:db8:1:2::/64"); 0 means [DefaultIPv6Prefix]. IPv4-mapped IPv6 addresses (in requests and
// in trusted) count as IPv4, and zones are dropped. An empty trusted trusts no peer, so the key is
// always the peer's address. It returns an error matching [ratelimit.ErrInvalidConfig], before any
// request, for a header other than [XForwardedFor] or [Forwarded], ipv6Prefix outside 0..128 or an
// invalid prefix in trusted. It copies trusted. The returned function does no I/O and is safe for
// concurrent use.
func TrustedProxyIP(trusted []netip.Prefix, header ForwardingHeader, ipv6Prefix int) (func(r *http.Request) (string, error), error) {
	if header != XForwardedFor && header != Forwarded {
		return nil, luakit.InvalidConfig("ratelimithttp", "TrustedProxyIP: header %v, want XForwardedFor or Forwarded", header)
	}
	if ipv6Prefix < 0 || ipv6Prefix > 128 {
		return nil, luakit.InvalidConfig("ratelimithttp", "TrustedProxyIP: IPv6 prefix /%d, want 0 (default /%d) to 128", ipv6Prefix, DefaultIPv6Prefix)
	}
	if ipv6Prefix == 0 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	nets := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		if !p.IsValid() {
			return nil, luakit.InvalidConfig("ratelimithttp", "TrustedProxyIP: trusted proxy network %d is invalid", i)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		nets[i] = p.Masked()
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	name := header.String()
	fwd := header == Forwarded
	return func(r *http.Request) (string, error) {
		peer, ok := parseNode(r.RemoteAddr, false)
		if !ok {
			return "", fmt.Errorf("ratelimithttp: peer address %.64q is not an IP address", r.RemoteAddr)
		}
		client := peer
		if !isTrusted(peer) {
			return ipKey(client, ipv6Prefix), nil
		}
		lines := r.Header.Values(name)
		for li := len(lines) - 1; li >= 0; li-- {
			rest, more := lines[li], true
			for more {
				var elem string
				rest, elem, more = cutLastElement(rest, fwd)
				elem = strings.Trim(elem, " \t")
				if elem == "" {
					continue
				}
				var a netip.Addr
				if fwd {
					a, ok = forwardedFor(elem)
				} else {
					a, ok = parseNode(elem, false)
				}
				if !ok {
					return "", fmt.Errorf("ratelimithttp: %s element %.64q from a trusted proxy is not an IP address", name, elem)
				}
				client = a
				if !isTrusted(a) {
					return ipKey(client, ipv6Prefix), nil
				}
			}
		}
		return ipKey(client, ipv6Prefix), nil
	}, nil
}

// ipKey is the key of a client address: IPv4 as is, IPv6 masked to bits.
func ipKey(a netip.Addr, bits int) string {
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(bits) // bits is 1..128 for an IPv6 address: never an error
	return p.String()
}

// cutLastElement splits s at its last list separator: the comma after which elem begins, outside
// quoted strings when quotes is set. found reports whether there was a comma (before is the text
// left of it); otherwise elem is all of s. The scan runs from the right and stops at that comma, so
// nothing left of it is looked at. In a well-formed list a quoted string's closing quote is
// preceded by an even run of backslashes and an escaped quote by an odd one; a malformed element
// may come out with the wrong bounds, but then it does not parse either.
func cutLastElement(s string, quotes bool) (before, elem string, found bool) {
	if !quotes {
		if i := strings.LastIndexByte(s, ','); i >= 0 {
			return s[:i], s[i+1:], true
		}
		return "", s, false
	}
	inQuote := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ',':
			if !inQuote {
				return s[:i], s[i+1:], true
			}
		case '"':
			n := 0
			for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				inQuote = !inQuote
			}
		}
	}
	return "", s, false
}

// forwardedFor parses one Forwarded element (RFC 7239 forwarded-element, without the surrounding
// whitespace) and returns the address of its "for" parameter. ok is false for a malformed element,
// a parameter given twice, a missing "for", or a node that is not an IP address.
func forwardedFor(elem string) (a netip.Addr, ok bool) {
	var seen []string // parameter names, lowercased: each at most once
	var node string
	found := false
	for i := 0; ; {
		// At the start of a pair: empty pairs (";;", a trailing ";") are allowed.
		if i = skipOWS(elem, i); i == len(elem) {
			break
		}
		if elem[i] == ';' {
			i++
			continue
		}
		j := i
		for j < len(elem) && isTchar(elem[j]) {
			j++
		}
		if j == i || j == len(elem) || elem[j] != '=' {
			return netip.Addr{}, false
		}
		key := strings.ToLower(elem[i:j])
		for _, k := range seen {
			if k == key {
				return netip.Addr{}, false
			}
		}
		seen = append(seen, key)
		var val string
		if i = j + 1; i < len(elem) && elem[i] == '"' {
			var b strings.Builder
			closed := false
			for i++; i < len(elem); i++ {
				c := elem[i]
				if c == '\\' {
					if i++; i == len(elem) {
						break
					}
					b.WriteByte(elem[i])
					continue
				}
				if c == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(c)
			}
			if !closed {
				return netip.Addr{}, false
			}
			val = b.String()
		} else {
			j = i
			for j < len(elem) && (isTchar(elem[j]) || elem[j] == ':' || elem[j] == '[' || elem[j] == ']') {
				j++
			}
			if j == i {
				return netip.Addr{}, false
			}
			val, i = elem[i:j], j
		}
		if key == "for" {
			node, found = val, true
		}
		if i = skipOWS(elem, i); i < len(elem) && elem[i] != ';' {
			return netip.Addr{}, false
		}
	}
	if !found {
		return netip.Addr{}, false
	}
	return parseNode(node, true)
}

func skipOWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parseNode parses an IP address, an IPv4 address with a port, or a bracketed IPv6 address with or
// without a port (a port is a decimal number up to 65535; with obfPort also an RFC 7239 obfuscated port, "_" and
// then letters, digits, ".", "_" or "-"). It unmaps IPv4-mapped IPv6 and drops a zone.
func parseNode(s string, obfPort bool) (netip.Addr, bool) {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		host, port = s[1:end], s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return netip.Addr{}, false
			}
			if port = port[1:]; port == "" {
				return netip.Addr{}, false
			}
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		host, port = s[:i], s[i+1:] // one colon: IPv4 with a port
		if port == "" {
			return netip.Addr{}, false
		}
	}
	if port != "" && !validPort(port, obfPort) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	if port != "" && !strings.HasPrefix(s, "[") && !a.Is4() {
		return netip.Addr{}, false // "x:port" is for IPv4 only
	}
	if strings.HasPrefix(s, "[") && a.Is4() {
		return netip.Addr{}, false // "[192.0.2.1]" is not a node
	}
	return a.Unmap().WithZone(""), true
}

func validPort(p string, obf bool) bool {
	if obf && len(p) > 1 && p[0] == '_' {
		for i := 1; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return true
	}
	if len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n <= 65535
}
