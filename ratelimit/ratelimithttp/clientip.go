package ratelimithttp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// DefaultIPv6Prefix is the prefix length [TrustedProxyIP] keys IPv6 clients by unless told
// otherwise: one /64, the smallest network a site is usually assigned, so that a client cannot
// multiply its quota by rotating addresses within its own network.
const DefaultIPv6Prefix = 64

// TrustedProxyIP returns a key function for [WithKey] naming the client IP of a request that may
// have passed through reverse proxies you run. trusted lists those proxies' networks (CIDRs).
//
// When the TCP peer (r.RemoteAddr) is not in trusted, the peer is the client and no header is read.
// Otherwise the forwarding chain is read from the Forwarded field (RFC 7239, its "for" parameters)
// when present, else from X-Forwarded-For (every field line, comma-separated, in order), and walked
// from the right (the hop the nearest proxy appended): the first address not in trusted is the
// client; when every hop is trusted, the leftmost one. Addresses a client put in front of that
// point are never used, so a forged header cannot change another client's key. An element that is
// not an IP address (an obfuscated or "unknown" Forwarded node, garbage) before the client is found
// is an error (the middleware answers 500 and logs it).
//
// The key is the IPv4 address, or the IPv6 address masked to ipv6Prefix bits in CIDR form (e.g.
// "2001:db8:1:2::/64"); 0 means [DefaultIPv6Prefix]. IPv4-mapped IPv6 addresses count as IPv4. It
// returns an error, before any request, for ipv6Prefix outside 0..128 or an invalid prefix in
// trusted. The function is safe for concurrent use.
func TrustedProxyIP(trusted []netip.Prefix, ipv6Prefix int) (func(r *http.Request) (string, error), error) {
	if ipv6Prefix < 0 || ipv6Prefix > 128 {
		return nil, fmt.Errorf("ratelimithttp: IPv6 prefix /%d, want 0 (default /64) to 128", ipv6Prefix)
	}
	if ipv6Prefix == 0 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	nets := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		if !p.IsValid() {
			return nil, fmt.Errorf("ratelimithttp: trusted proxy network %d is invalid", i)
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
	return func(r *http.Request) (string, error) {
		peer, err := parseHost(r.RemoteAddr)
		if err != nil {
			return "", fmt.Errorf("ratelimithttp: peer address: %w", err)
		}
		client := peer
		if isTrusted(peer) {
			hops, err := forwardedFor(r.Header)
			if err != nil {
				return "", err
			}
			for i := len(hops) - 1; i >= 0; i-- {
				a, err := parseHost(hops[i])
				if err != nil {
					return "", fmt.Errorf("ratelimithttp: forwarding hop %d: %w", i, err)
				}
				client = a
				if !isTrusted(a) {
					break
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

// forwardedFor returns the forwarding chain of h: the Forwarded "for" values when the field is
// present, else the X-Forwarded-For elements, left to right.
func forwardedFor(h http.Header) ([]string, error) {
	if lines := h.Values("Forwarded"); len(lines) > 0 {
		var hops []string
		for _, line := range lines {
			for _, elem := range strings.Split(line, ",") {
				found := false
				for _, pair := range strings.Split(elem, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						hops = append(hops, strings.Trim(strings.TrimSpace(v), `"`))
						found = true
					}
				}
				if !found && strings.TrimSpace(elem) != "" {
					return nil, errors.New("ratelimithttp: Forwarded element without a for parameter")
				}
			}
		}
		return hops, nil
	}
	var hops []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, elem := range strings.Split(line, ",") {
			if e := strings.TrimSpace(elem); e != "" {
				hops = append(hops, e)
			}
		}
	}
	return hops, nil
}

// parseHost parses an address with or without a port, IPv6 with or without brackets, unmapping
// IPv4-mapped IPv6 and dropping a zone.
func parseHost(s string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return a.Unmap().WithZone(""), nil
}
